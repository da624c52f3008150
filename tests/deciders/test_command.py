"""The command backend against fake agent CLIs: real scripts, real process groups."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from looop_py.beat.pulse import beat
from looop_py.deciders.base import (
    DecideError,
    Decision,
    InvalidReply,
    PermanentError,
    TemporaryError,
    TimedOut,
    request_in,
)
from looop_py.deciders.command import CommandDecider, render
from looop_py.errors import ConfigError
from looop_py.workdir.config import DeciderConfig
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, run_looop, wait_for

NOOP = {"action": "noop", "reason": "from the fake cli"}
PROMPT = "THE PROMPT\nwith 'quotes' and $(not a command) and ünïcode\n"


def fake_cli(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(0o755)
    return path


def decide(
    wd: Paths, command: str, timeout_s: float = 10.0, slept: list[float] | None = None, **kw: Any
) -> Decision:
    """One decide; a retry's wait is recorded in `slept`, never slept for real."""
    cfg = DeciderConfig(backend="command", command=command, timeout_s=timeout_s, **kw)
    sleep = (slept if slept is not None else []).append
    return CommandDecider(cfg, sleep=sleep).decide(request_in(wd, 0.0, prompt=PROMPT))


def stream_json(move: dict[str, object]) -> str:
    text = json.dumps(move)
    events = [
        {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet"},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": text,
            "total_cost_usd": 0.0421,
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 2000,
                "cache_creation_input_tokens": 0,
                "output_tokens": 55,
            },
        },
    ]
    return "".join(json.dumps(e) + "\n" for e in events)


def test_claude_style_stream_json_with_the_prompt_on_stdin(wd: Paths, tmp_path: Path) -> None:
    out = tmp_path / "stream.ndjson"
    out.write_text(stream_json(NOOP))
    cli = fake_cli(
        tmp_path,
        "claude",
        f'cat > "$PWD/seen-prompt.txt"\necho "$LOOOP_DIR" > seen-dir.txt\ncat {out}\n',
    )
    decision = decide(wd, f"{cli} -p --output-format stream-json --verbose")
    assert decision.move == NOOP
    usage = decision.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (2010, 55, 0.0421)
    assert decision.meta["source"] == "claude-stream"
    assert (wd.root / "seen-prompt.txt").read_text() == PROMPT  # stdin, in the work dir
    assert (wd.root / "seen-dir.txt").read_text().strip() == str(wd.root)


def test_a_fenced_move_in_plain_text(wd: Paths, tmp_path: Path) -> None:
    cli = fake_cli(tmp_path, "llm", "cat >/dev/null\nprintf '```json\\n%s\\n```\\n' \"$1\"\n")
    decision = decide(wd, f"{cli} '{json.dumps(NOOP)}'")
    assert decision.move == NOOP
    assert decision.usage is None  # plain text: unmetered


def test_plain_text_with_configured_prices_is_still_unmetered(wd: Paths, tmp_path: Path) -> None:
    cli = fake_cli(tmp_path, "llm", f"echo '{json.dumps(NOOP)}'\n")
    decision = decide(wd, str(cli), usd_per_mtok_in=1.0)
    assert decision.usage is None


def test_prompt_file_placeholder_is_quoted_and_removed_afterwards(
    wd: Paths, tmp_path: Path
) -> None:
    cli = fake_cli(
        tmp_path,
        "pi",
        'echo "$1" > seen-path.txt\ncp "$1" seen-prompt.txt\n'
        'test -t 0 || [ -z "$(cat)" ] || exit 9\n'  # stdin is empty when a file is used
        f"echo '{json.dumps(NOOP)}'\n",
    )
    for form in ("{{prompt_file}}", '"{{prompt_file}}"', "'{{prompt_file}}'"):
        decision = decide(wd, f"{cli} {form}")
        assert decision.move == NOOP
        assert (wd.root / "seen-prompt.txt").read_text() == PROMPT
        used = Path((wd.root / "seen-path.txt").read_text().strip())
        assert not used.exists()  # the private prompt file is gone


def test_render_quotes_hostile_paths() -> None:
    assert render("cat {{prompt_file}}", Path("/tmp/a b;rm -rf ~")) == "cat '/tmp/a b;rm -rf ~'"
    assert render('x "$(cat "{{prompt_file}}")"', Path("/t/p")) == 'x "$(cat /t/p)"'


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_hanging_cli_is_killed_with_its_whole_group(wd: Paths, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    cli = fake_cli(
        tmp_path,
        "codex",
        f"sleep 300 & echo $! >> {pids}\n(sleep 300) & echo $! >> {pids}\n"
        f"echo $$ >> {pids}\necho partial\nsleep 300\n",
    )
    started = time.monotonic()
    with pytest.raises(TimedOut, match=r"no answer within 0\.5s; its process group was killed"):
        decide(wd, str(cli), timeout_s=0.5)
    assert time.monotonic() - started < 3
    ids = [int(p) for p in pids.read_text().split()]
    assert len(ids) == 3

    def alive() -> list[int]:
        return [p for p in ids if _alive(p)]

    wait_for(lambda: not alive(), 2, lambda: f"the whole group to die; alive: {alive()}")


def test_a_failing_cli_reports_exit_code_and_stderr_tail(wd: Paths, tmp_path: Path) -> None:
    cli = fake_cli(
        tmp_path,
        "claude",
        'for i in $(seq 1 500); do echo "noise $i" >&2; done\n'
        "echo 'Error: invalid API key · run /login' >&2\nexit 3\n",
    )
    slept: list[float] = []
    with pytest.raises(PermanentError, match="exited 3") as info:
        decide(wd, str(cli), slept=slept)
    message = info.value.message
    assert "invalid API key · run /login" in message
    assert "noise 1 " not in message  # only the tail
    assert len(message) < 700
    # "noise 500" in the tail is no HTTP status: a bad key is not retried (it was, 4 times).
    assert slept == [] and "attempts" not in message


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("printf '\\xff\\xfe{}'\n", "not UTF-8"),
        ('echo \'{"action":"noop"}\'; echo \'{"action":"noop"}\'\n', "more than one"),
        ("echo 'I would wait and see.'\n", "no JSON object"),
        ("head -c 5000000 /dev/zero | tr '\\0' ' '\n", "the cap is"),
        (
            'echo \'{"type":"result","subtype":"error_max_turns","is_error":true}\'\n',
            "error_max_turns",
        ),
        ("exit 0\n", "no text"),
    ],
)
def test_unusable_output_is_a_decide_error(
    wd: Paths, tmp_path: Path, body: str, reason: str
) -> None:
    cli = fake_cli(tmp_path, "agent", body)
    slept: list[float] = []
    with pytest.raises(PermanentError, match=reason):
        decide(wd, str(cli), slept=slept)
    assert slept == []


def test_a_command_is_required() -> None:
    with pytest.raises(ConfigError, match="needs a command"):
        CommandDecider(DeciderConfig(backend="command"))


def test_a_pulse_through_a_claude_json_cli(wd: Paths, tmp_path: Path) -> None:
    envelope = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "```json\n" + json.dumps(NOOP) + "\n```",
        "total_cost_usd": 0.01,
        "usage": {"input_tokens": 100, "output_tokens": 10},
    }
    out = tmp_path / "envelope.json"
    out.write_text(json.dumps(envelope))
    cli = fake_cli(tmp_path, "claude", f"cat >/dev/null\ncat {out}\n")
    wd.config.write_text(f'[decider]\nbackend = "command"\ncommand = "{cli} -p"\ntimeout_s = 10\n')
    result = beat(open_wd(wd))
    assert result.outcome == "decided", result.reason
    assert result.move == NOOP
    # And the real CLI, as cron runs it:
    cli.write_text("#!/usr/bin/env bash\nexit 4\n")
    r = run_looop("-C", str(wd.root), "pulse", "--force", "--json")
    assert r.returncode == 1, r.stderr
    assert "exited 4" in json.loads(r.stdout)["reason"]
    assert os.environ.get("LOOOP_DECIDE") is None  # only the child saw it


def test_a_failing_cli_s_envelope_is_the_reason_and_is_kept(wd: Paths, tmp_path: Path) -> None:
    envelope = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 401,
        "result": "Invalid API key · Fix external API key",
    }
    cli = fake_cli(tmp_path, "claude", f"echo '{json.dumps(envelope)}'\nexit 1\n")
    with pytest.raises(DecideError) as info:
        decide(wd, str(cli))
    assert info.value.message == (
        "the decider command exited 1: claude reported an error (HTTP 401):"
        " Invalid API key · Fix external API key"
    )
    assert "Invalid API key" in info.value.raw
    assert isinstance(info.value, PermanentError)


def test_a_move_printed_by_a_failing_cli_is_not_trusted(wd: Paths, tmp_path: Path) -> None:
    cli = fake_cli(tmp_path, "x", f"echo '{json.dumps(NOOP)}'\nexit 2\n")
    with pytest.raises(DecideError, match="exited 2 after printing a reply"):
        decide(wd, str(cli))


def test_temporary_failures_are_retried_with_backoff_within_max_wait(
    wd: Paths, tmp_path: Path
) -> None:
    count = tmp_path / "count"
    cli = fake_cli(
        tmp_path,
        "flaky",
        f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}\n"
        f"if [ $n -lt 2 ]; then echo 'Error: Error code: 529 - overloaded' >&2; exit 1; fi\n"
        f"echo '{json.dumps(NOOP)}'\n",
    )
    slept: list[float] = []
    cfg = DeciderConfig(backend="command", command=str(cli), max_retries=3, backoff_s=1.0)
    decision = CommandDecider(cfg, sleep=slept.append).decide(request_in(wd, 0.0, prompt=PROMPT))
    assert decision.move == NOOP and decision.meta["attempts"] == 3
    assert [round(s) for s in slept] == [1, 2]
    count.unlink()
    cfg = DeciderConfig(backend="command", command=str(cli), max_retries=3, max_wait_s=2.5)
    with pytest.raises(TemporaryError, match=r"529.*would pass max_wait_s=2\.5"):
        CommandDecider(cfg, sleep=slept.append).decide(request_in(wd, 0.0, prompt=PROMPT))


def test_a_permanent_failure_is_not_retried(wd: Paths, tmp_path: Path) -> None:
    cli = fake_cli(tmp_path, "x", "echo 'Error: Error code: 401 - bad key' >&2\nexit 1\n")
    slept: list[float] = []
    cfg = DeciderConfig(backend="command", command=str(cli), max_retries=3)
    with pytest.raises(PermanentError, match="401 - bad key"):
        CommandDecider(cfg, sleep=slept.append).decide(request_in(wd, 0.0, prompt=PROMPT))
    assert slept == []


def _claude_error(status: int, text: str) -> str:
    envelope = {"type": "result", "is_error": True, "api_error_status": status, "result": text}
    return f"echo '{json.dumps(envelope)}'\nexit 1\n"


def _codex_error(text: str) -> str:
    events = [
        {"type": "thread.started"},
        {"type": "turn.started"},
        {"type": "error", "message": text},
    ]
    return "".join(f"echo '{json.dumps(e)}'\n" for e in events) + "exit 1\n"


def _pi_error(text: str) -> str:
    message = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": text}
    events = [{"type": "agent_start"}, {"type": "message_end", "message": message}]
    return "".join(f"echo '{json.dumps(e)}'\n" for e in events)  # pi exits 0


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        # What the real CLIs print (tests/agents/test_deciders.py runs them) for each status.
        (_claude_error(401, "Invalid API key · Fix external API key"), PermanentError),
        (_claude_error(429, "API Error: Request rejected (429) · rate limited"), TemporaryError),
        (_claude_error(529, "API Error: 529 overloaded"), TemporaryError),
        (_claude_error(400, "API Error: 400 HTTP 400"), PermanentError),
        (_codex_error("unexpected status 401 Unauthorized: invalid x-api-key"), PermanentError),
        (_codex_error("exceeded retry limit, last status: 429 Too Many Requests"), TemporaryError),
        (_codex_error("We’re currently experiencing high demand"), TemporaryError),
        (_codex_error("unexpected status 529 <unknown status code>: HTTP 529"), TemporaryError),
        (_pi_error("401 invalid x-api-key"), PermanentError),
        (_pi_error("429 rate limited by the server"), TemporaryError),
        (_pi_error("500 internal error"), TemporaryError),
        ("echo 'Error: Error code: 401 - invalid x-api-key' >&2\nexit 1\n", PermanentError),
        ("echo 'Error: Error code: 429 - rate limited' >&2\nexit 1\n", TemporaryError),
        ("echo 'Error: Error code: 503 - unavailable' >&2\nexit 1\n", TemporaryError),
        ("echo 'model is overloaded, try later' >&2\nexit 1\n", TemporaryError),
        # a number in the noise is not a status; a missing CLI is not worth a retry
        ("echo 'wrote 512 bytes to /tmp/pytest-529/x' >&2\nexit 1\n", PermanentError),
        ("echo 'bash: claude: command not found' >&2\nexit 127\n", PermanentError),
        ("echo 'I would wait and see.'\n", InvalidReply),
    ],
)
def test_the_cli_failure_is_typed_where_its_output_is_read(
    wd: Paths, tmp_path: Path, body: str, kind: type[DecideError]
) -> None:
    cli = fake_cli(tmp_path, "agent", body)
    slept: list[float] = []
    with pytest.raises(DecideError) as info:
        decide(wd, str(cli), slept=slept, max_retries=0)
    assert isinstance(info.value, kind), info.value
    assert not isinstance(info.value, TimedOut)
    assert slept == []


def test_llm_usage_from_its_stderr(wd: Paths, tmp_path: Path) -> None:
    cli = fake_cli(
        tmp_path,
        "llm",
        f"echo '{json.dumps(NOOP)}'\necho 'Token usage: 1,200 input, 30 output' >&2\n",
    )
    decision = decide(wd, str(cli))
    assert decision.usage is not None
    assert (decision.usage.input_tokens, decision.usage.output_tokens) == (1200, 30)


def test_llm_cached_tokens_from_its_usage_details(wd: Paths, tmp_path: Path) -> None:
    said = 'Token usage: 1,200 input, 30 output, {"prompt_tokens_details": {"cached_tokens": 1000}}'
    cli = fake_cli(tmp_path, "llm", f"echo '{json.dumps(NOOP)}'\necho '{said}' >&2\n")
    usage = decide(wd, str(cli)).usage
    assert usage is not None and (usage.input_tokens, usage.cache_read_tokens) == (1200, 1000)


def test_a_billed_invalid_reply_is_priced_and_carries_its_usage(wd: Paths, tmp_path: Path) -> None:
    cli = fake_cli(
        tmp_path,
        "llm",
        "echo 'I would rather not pick a move.'\necho 'Token usage: 1,000 input, 100 output' >&2\n",
    )
    with pytest.raises(InvalidReply) as info:
        decide(wd, str(cli), usd_per_mtok_in=3.0, usd_per_mtok_out=15.0)
    usage = info.value.usage
    assert usage is not None and usage.total_tokens == 1100
    assert usage.cost_usd == pytest.approx((1000 * 3 + 100 * 15) / 1e6)


def test_every_attempt_s_usage_is_summed(wd: Paths, tmp_path: Path) -> None:
    """A temporary failure that reported usage was billed: the decide's usage holds it."""
    count = tmp_path / "count"
    cli = fake_cli(
        tmp_path,
        "flaky",
        f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}\n"
        "echo 'Token usage: 100 input, 10 output' >&2\n"
        f"if [ $n -lt 1 ]; then echo 'Error: Error code: 529 - overloaded' >&2; exit 1; fi\n"
        f"echo '{json.dumps(NOOP)}'\n",
    )
    decision = decide(wd, str(cli), max_retries=2, backoff_s=0.01)
    assert decision.meta["attempts"] == 2
    assert decision.usage is not None and decision.usage.total_tokens == 220
    count.unlink()
    with pytest.raises(TemporaryError) as info:
        decide(wd, str(cli), max_retries=0, backoff_s=0.01)
    assert info.value.usage is not None and info.value.usage.total_tokens == 110
