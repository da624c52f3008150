"""parse.py: exactly one JSON object out of raw backend text, envelopes unwrapped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from looop_py.deciders.base import DecideError, InvalidReply, TemporaryError, Usage
from looop_py.deciders.parse import CliError, Source, parse_object, parse_output

NOOP = {"action": "noop", "reason": "quiet"}
NOOP_TEXT = json.dumps(NOOP)


def lines(*events: dict[str, Any]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def claude_result(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": 1234,
        "num_turns": 1,
        "result": text,
        "session_id": "0e639165",
        "total_cost_usd": 0.0123,
        "usage": {
            "input_tokens": 3,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 15000,
            "output_tokens": 42,
        },
        **extra,
    }


CLAUDE_STREAM = lines(
    {"type": "system", "subtype": "init", "session_id": "s", "tools": [], "model": "sonnet"},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": NOOP_TEXT}]}},
    claude_result(NOOP_TEXT),
)
CODEX_STREAM = lines(
    {"type": "thread.started", "thread_id": "t1"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "i0", "type": "reasoning", "text": "thinking"}},
    {"type": "item.completed", "item": {"id": "i1", "type": "agent_message", "text": NOOP_TEXT}},
    {
        "type": "turn.completed",
        "usage": {"input_tokens": 2000, "cached_input_tokens": 1500, "output_tokens": 25},
    },
)
PI_STREAM = lines(
    {"type": "session", "id": "p1"},
    {"type": "agent_start"},
    {
        "type": "message_end",
        "message": {"role": "user", "content": [{"type": "text", "text": "x"}]},
    },
    {
        "type": "message_end",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "```json\n" + NOOP_TEXT + "\n```"}],
            "usage": {
                "input": 900,
                "output": 30,
                "cacheRead": 100,
                "cacheWrite": 0,
                "cost": {"total": 0.002},
            },
            "stopReason": "stop",
        },
    },
    {"type": "turn_end"},
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (NOOP_TEXT, NOOP),
        (f"\n\n   {NOOP_TEXT}  \n", NOOP),
        (f"```json\n{NOOP_TEXT}\n```", NOOP),
        (f"```\n{NOOP_TEXT}\n```\n", NOOP),
        (f"  ```JSON \r\n{NOOP_TEXT}\r\n```  ", NOOP),
        (f"\ufeff{NOOP_TEXT}", NOOP),
        ('{"action": "noop", "reason": "a } brace and ``` a fence"}', None),
        ('{\n  "action": "write_goal",\n  "id": "g",\n  "body": "# T\\n\\nline"\n}', None),
        (NOOP_TEXT.encode(), NOOP),
        ('{"action": "noop", "reason": "caf\u00e9 \u2713"}'.encode(), None),
    ],
)
def test_accepted(raw: str | bytes, expected: dict[str, Any] | None) -> None:
    parsed = parse_output(raw)
    text = raw.decode() if isinstance(raw, bytes) else raw
    want = expected if expected is not None else json.loads(text)
    assert parsed.value == want
    assert parsed.source == "text" and parsed.usage is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "no text"),
        ("   \n\t ", "no text"),
        ("I think we should wait.", "no JSON object"),
        (f"Here is my move: {NOOP_TEXT}", "no JSON object"),
        (f"{NOOP_TEXT} hope this helps!", "text after the JSON object"),
        (f"{NOOP_TEXT}\n{NOOP_TEXT}", "more than one JSON value"),
        ('{"action":"noop"}{"action":"run_shell","cmd":"rm -rf ~"}', "more than one"),
        (f"{NOOP_TEXT} []", "more than one"),
        ('{"action": "noop",}', "not valid JSON"),
        ('{"action": "noop"', "not valid JSON"),
        ('{"action": NaN}', "not strict JSON"),
        ("[" * 5000 + "]" * 5000, "not valid JSON"),
        ("[1, 2]", "array, not an object"),
        ('"noop"', "string, not an object"),
        ("42", "number, not an object"),
        ("null", "null, not an object"),
        ("true", "boolean, not an object"),
        (b'{"action": "noop", "reason": "\xff\xfe"}', "not UTF-8"),
        (b"\xc3(", "not UTF-8"),
        ("```json\n\n```", "fence is empty"),
        (f"```json\n{NOOP_TEXT}\n", "fence that is not the whole reply"),
        (f"```json\n{NOOP_TEXT}\n```\nand then prose", "fence that is not the whole reply"),
        (f"```json\n{NOOP_TEXT}\n```\n```json\n{NOOP_TEXT}\n```", "more than one code fence"),
        (f"```json\n{NOOP_TEXT}\n{NOOP_TEXT}\n```", "more than one"),
        (f"Sure!\n```json\n{NOOP_TEXT}\n```", "no JSON object"),
    ],
)
def test_rejected_with_a_reason(raw: str | bytes, reason: str) -> None:
    with pytest.raises(DecideError, match=reason):
        parse_output(raw)


def test_claude_json_envelope() -> None:
    parsed = parse_output(json.dumps(claude_result(f"```json\n{NOOP_TEXT}\n```")))
    assert parsed.value == NOOP and parsed.source == "claude-json"
    assert parsed.usage is not None
    assert parsed.usage.input_tokens == 3 + 100 + 15000 and parsed.usage.output_tokens == 42
    assert (parsed.usage.cache_read_tokens, parsed.usage.cache_write_tokens) == (15000, 100)
    assert parsed.usage.cost_usd == 0.0123


def test_claude_stream_json_takes_the_final_result_line() -> None:
    parsed = parse_output(CLAUDE_STREAM)
    assert parsed.value == NOOP and parsed.source == "claude-stream"
    assert parsed.usage is not None and parsed.usage.cost_usd == 0.0123
    assert parsed.text == NOOP_TEXT


def test_claude_errors_and_cut_streams() -> None:
    with pytest.raises(DecideError, match="claude reported an error: budget"):
        parse_output(json.dumps(claude_result("budget", is_error=True)))
    failed = claude_result("", subtype="error_max_turns", is_error=True)
    with pytest.raises(DecideError, match="error_max_turns"):
        parse_output(lines({"type": "system", "subtype": "init"}, failed))
    cut = lines(
        {"type": "system", "subtype": "init"},
        {"type": "assistant", "message": {"content": []}},
    )
    with pytest.raises(DecideError, match="without a result event"):
        parse_output(cut)
    # The envelope's text obeys the same rules as a bare reply.
    with pytest.raises(DecideError, match="more than one"):
        parse_output(json.dumps(claude_result(NOOP_TEXT + NOOP_TEXT)))


def test_codex_exec_json() -> None:
    parsed = parse_output(CODEX_STREAM)
    assert parsed.value == NOOP and parsed.source == "codex"
    assert parsed.usage is not None
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (2000, 25)
    assert (parsed.usage.cache_read_tokens, parsed.usage.cache_write_tokens) == (1500, 0)
    assert parsed.usage.cost_usd is None
    failed = lines(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.failed", "error": {"message": "usage limit reached"}},
    )
    with pytest.raises(DecideError, match="usage limit reached"):
        parse_output(failed)
    retried = lines(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "error", "message": "Reconnecting... 1/5"},
        {"type": "item.completed", "item": {"id": "i", "type": "agent_message", "text": NOOP_TEXT}},
    )
    assert parse_output(retried).value == NOOP
    with pytest.raises(DecideError, match="codex printed no reply"):
        parse_output(lines({"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"}))


def test_pi_mode_json() -> None:
    parsed = parse_output(PI_STREAM)
    assert parsed.value == NOOP and parsed.source is Source.PI and parsed.source == "pi"
    assert parsed.usage is not None
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens) == (1000, 30)
    assert (parsed.usage.cache_read_tokens, parsed.usage.cache_write_tokens) == (100, 0)
    assert parsed.usage.cost_usd == pytest.approx(0.002)


def test_json_lines_that_are_no_known_stream_count_as_two_objects() -> None:
    forged = lines({"type": "x", "action": "noop"}, {"type": "y", "action": "run_shell"})
    with pytest.raises(DecideError, match="more than one"):
        parse_output(forged)


def test_a_move_that_happens_to_have_type_result_is_not_an_envelope() -> None:
    value = {"action": "noop", "type": "result", "result": "x"}
    assert parse_output(json.dumps(value)).value == value


def test_parse_object_is_the_bare_rule() -> None:
    assert parse_object(f"```json\n{NOOP_TEXT}\n```") == NOOP
    with pytest.raises(DecideError):
        parse_object(CLAUDE_STREAM)


def test_pi_events_looop_does_not_know_are_skipped() -> None:
    extra = [
        {"type": "compaction_start"},
        {"type": "compaction_end"},
        {"type": "queue_update", "queue": []},
        {"type": "session_info", "name": "x"},
        {"type": "some_event_from_pi_0_99"},
    ]
    raw = "".join(json.dumps(e) + "\n" for e in extra) + PI_STREAM
    parsed = parse_output(raw)
    assert parsed.value == NOOP and parsed.source == "pi"


def test_pi_retried_then_answered_is_a_reply_and_failed_last_is_its_error() -> None:
    failed = {
        "type": "message_end",
        "message": {
            "role": "assistant",
            "content": [],
            "stopReason": "error",
            "errorMessage": "500 overloaded",
        },
    }
    start = json.dumps({"type": "agent_start"}) + "\n"
    assert parse_output(start + json.dumps(failed) + "\n" + PI_STREAM).value == NOOP
    with pytest.raises(CliError, match="pi reported an error: 500 overloaded") as info:
        parse_output(PI_STREAM + json.dumps(failed) + "\n")
    assert isinstance(info.value, TemporaryError)  # pi's message starts with the status


# -- a billed reply that holds no move still reports what it cost ---------------------------


@pytest.mark.parametrize(
    "raw",
    [
        json.dumps(claude_result("I think we should wait.")),
        lines(
            {"type": "system", "subtype": "init"},
            claude_result('{"action": "noop"} {"action": "noop"}'),
        ),
        CODEX_STREAM.replace(json.dumps(NOOP_TEXT), json.dumps("{bad json")),
        PI_STREAM.replace(json.dumps("```json\n" + NOOP_TEXT + "\n```"), json.dumps("prose")),
    ],
    ids=["claude-prose", "claude-two-moves", "codex-bad-json", "pi-prose"],
)
def test_an_invalid_reply_carries_the_usage_it_was_billed(raw: str) -> None:
    with pytest.raises(InvalidReply) as info:
        parse_output(raw)
    usage = info.value.usage
    assert usage is not None and usage.input_tokens > 0 and usage.output_tokens > 0


def test_claude_model_usage_counts_what_a_cut_stream_zeroes() -> None:
    """After a cut stream claude's `usage` says 0; `modelUsage` keeps every model's counts
    (its side calls too), and it is what the provider billed."""
    event = claude_result(
        NOOP_TEXT,
        usage={"input_tokens": 0, "output_tokens": 0},
        modelUsage={
            "claude-sonnet-4-5": {
                "inputTokens": 120,
                "outputTokens": 30,
                "cacheReadInputTokens": 1000,
                "cacheCreationInputTokens": 50,
                "costUSD": 0.004,
            },
            "claude-haiku-4-5": {"inputTokens": 40, "outputTokens": 5, "costUSD": 0.0001},
        },
    )
    usage = parse_output(json.dumps(event)).usage
    assert usage == Usage(1210, 35, 0.0123, 1000, 50)  # total_cost_usd wins over the rows


def test_a_failed_claude_run_keeps_its_usage() -> None:
    event = claude_result(
        "API Error: 500",
        is_error=True,
        subtype="error_during_execution",
        modelUsage={"m": {"inputTokens": 7, "outputTokens": 3}},
    )
    with pytest.raises(CliError) as info:
        parse_output(json.dumps(event))
    assert info.value.usage is not None and info.value.usage.total_tokens == 10
