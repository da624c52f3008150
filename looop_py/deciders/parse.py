"""Raw backend output → exactly one JSON object, plus any usage the output reports.

What a model says is untrusted text. This module accepts one JSON object,
optionally inside one markdown code fence, and nothing else: no prose around
it, no second object, no bytes that are not UTF-8. It also unwraps the
envelopes agent CLIs print around the model's text:

- claude `--output-format json`: one `{"type": "result", "result": <text>, …}` object;
- claude `--output-format stream-json`: NDJSON whose final `{"type": "result"}` line
  carries the text, `usage` and `total_cost_usd`;
- codex `exec --json`: NDJSON; the last `item.completed` agent message is the text,
  `turn.completed` lines carry `usage`;
- pi `--mode json`: NDJSON; the last assistant `message_end` is the text, and each
  assistant message carries `usage` (with `cost.total`).

Event kinds a parser does not know are skipped (pi 0.73 added `compaction_start/end`,
`queue_update`, `session_info`): a CLI's new events must not turn a good reply into an
error. An error the CLI itself reported is a `CliError`, so the caller can show its text,
typed here by what the CLI said: temporary when it names an HTTP status that says a later
attempt may succeed (408, 429, 5xx) or an overload, else permanent (`cli_error`). Output that
holds no move is an InvalidReply.

Whether the object is a valid move is not decided here (moves.parse does that).
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import Any

from looop_py import jsonio
from looop_py.deciders.base import (
    DecideError,
    InvalidReply,
    PermanentError,
    TemporaryError,
    Usage,
    temporary_status,
)

_FENCE = re.compile(r"\A```[A-Za-z0-9_+-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```\Z", re.DOTALL)
_CLAUDE_EVENTS = {"system", "assistant", "user", "result", "stream_event"}
# Events only pi prints; one of them next to a `message_end` marks a pi stream.
_PI_MARKS = {"session", "agent_start", "agent_end", "turn_start", "turn_end"}


# How agent CLIs name the HTTP status of a failed model call: claude "API Error: 500 …" and
# "Request rejected (429)", codex "unexpected status 529 …" and "last status: 429 …", llm
# "Error code: 429 - …". A bare number (a line count, a port, a path) is not a status.
_STATUS = re.compile(
    r"\b(?:status|error code|api error)\s*:?\s*([1-5]\d\d)\b|\(([1-5]\d\d)\)", re.I
)
# What they say about a temporary failure that names no status (codex: "high demand").
_TEMPORARY = re.compile(r"rate.?limit|overloaded|high demand|temporar", re.I)


class CliError(DecideError):
    """The agent CLI reported that it failed (its envelope or stderr says so); the text is
    its own. Always raised as CliTemporary or CliPermanent (`cli_error`)."""


class CliTemporary(CliError, TemporaryError):
    """The CLI named a cause a later attempt may get past (a 429, a 5xx, an overload)."""


class CliPermanent(CliError, PermanentError):
    """The CLI failed for any other reason (a bad key, a bad request, its own error)."""


def cli_error(message: str, hint: str | None = None, *, status: int | None = None) -> CliError:
    """The CLI's failure, typed by the HTTP status it reported (`status`, else one its words
    name) or, naming none, by whether its words call the failure temporary."""
    if status is None:
        found = _STATUS.search(message)
        status = int(found[1] or found[2]) if found else None
    if status is not None:
        temporary = temporary_status(status)
    else:
        temporary = _TEMPORARY.search(message) is not None
    return (CliTemporary if temporary else CliPermanent)(message, hint)


class Source(enum.StrEnum):
    """What the move was read from (`source` in a decide's meta)."""

    TEXT = "text"  # the model's text as printed
    CLAUDE_JSON = "claude-json"
    CLAUDE_STREAM = "claude-stream"
    CODEX = "codex"
    PI = "pi"


@dataclass(frozen=True)
class Parsed:
    value: dict[str, Any]  # the one JSON object the model produced
    text: str  # the model's own text it was read from (envelopes removed)
    usage: Usage | None = None  # tokens/cost when the output reported them
    source: Source = Source.TEXT


def _preview(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def decode_utf8(raw: bytes | str, what: str = "the output") -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidReply(
            f"{what} is not UTF-8 (invalid byte at offset {exc.start})",
            "the decider must print UTF-8 JSON",
        ) from None


def parse_object(text: str) -> dict[str, Any]:
    """One JSON object from model text: surrounding whitespace and one fence allowed."""
    body = text.strip().lstrip("\ufeff").strip()
    if not body:
        raise InvalidReply("the decider returned no text; expected one JSON object")
    fence = _FENCE.match(body)
    if fence:
        body = fence.group("body").strip()
        if "```" in body:
            raise InvalidReply(
                "the reply holds more than one code fence; exactly one move is allowed"
            )
        if not body:
            raise InvalidReply("the code fence is empty; expected one JSON object inside")
    elif body.startswith("```"):
        raise InvalidReply(
            "a code fence that is not the whole reply (unclosed, or text after it)",
            "reply with one JSON object, optionally inside one ``` fence, and nothing else",
        )
    try:
        value = jsonio.loads(body)
    except jsonio.JSONDecodeError as exc:
        raise InvalidReply(_why_not_json(body, str(exc))) from None
    if not isinstance(value, dict):
        raise InvalidReply(
            f"the decider returned a JSON {_kind(value)}, not an object",
            'reply with one object such as {"action": "noop"}',
        )
    return value


def _kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _why_not_json(body: str, detail: str) -> str:
    """A reason a person can act on: garbage, prose, or more than one value."""

    try:
        _, end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError:
        if body[0] not in "{[":
            return f"no JSON object in the reply (it starts with {_preview(body)})"
        return f"the reply is not valid JSON ({detail})"
    except (ValueError, RecursionError):
        return f"the reply is not valid JSON ({detail})"
    rest = body[end:].lstrip()
    if not rest:  # the stdlib accepted what orjson refused (NaN, huge numbers …)
        return f"the reply is not strict JSON ({detail})"
    if rest[0] in "{[":
        return "the reply holds more than one JSON value; exactly one object is allowed"
    return f"text after the JSON object: {_preview(rest)}"


# -- agent CLI envelopes -------------------------------------------------------------


def parse_output(raw: bytes | str) -> Parsed:
    """Parse what an agent CLI printed: a plain reply, or one of the known envelopes."""
    text = decode_utf8(raw)
    events = _ndjson_events(text)
    if events is not None:
        kinds = {e["type"] for e in events}
        if any(k.startswith(("thread.", "turn.", "item.")) for k in kinds):
            return _codex(events)
        if "message_end" in kinds and kinds & _PI_MARKS:
            return _pi(events)
        if "result" in kinds:
            return _claude_result(next(e for e in reversed(events) if e["type"] == "result"), True)
        if kinds & _CLAUDE_EVENTS and kinds <= _CLAUDE_EVENTS:
            raise InvalidReply(
                "the claude stream ended without a result event (was the run cut short?)"
            )
    value = parse_object(text)
    envelope = "result" in value or "is_error" in value
    if value.get("type") == "result" and envelope and "action" not in value:
        return _claude_result(value, False)
    return Parsed(value, text)


def _ndjson_events(text: str) -> list[dict[str, Any]] | None:
    """Every line a JSON object with a string `type`, two lines or more; else None."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    events = []
    for line in lines:
        try:
            event = jsonio.loads(line)
        except jsonio.JSONDecodeError:
            return None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return None
        events.append(event)
    return events


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _num(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _claude_result(event: dict[str, Any], stream: bool) -> Parsed:
    source = Source.CLAUDE_STREAM if stream else Source.CLAUDE_JSON
    result = event.get("result")
    usage = _claude_usage(event)
    if event.get("is_error") or event.get("subtype") not in (None, "success"):
        why = result if isinstance(result, str) and result else event.get("subtype", "error")
        status = event.get("api_error_status")
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        code = f" (HTTP {status})" if status is not None else ""
        error = cli_error(f"claude reported an error{code}: {str(why)[:300]}", status=status)
        error.usage = usage
        raise error
    if not isinstance(result, str):
        raise _billed(InvalidReply("the claude result event has no text `result`"), usage)
    return Parsed(_object(result, usage), result, usage, source)


def _claude_usage(event: dict[str, Any]) -> Usage | None:
    """What a claude result reports spending: its `modelUsage` (every model the run called,
    side calls too; after a cut stream the only counts it keeps), else its `usage`.

    Cached prompt tokens are still prompt tokens: counted, so budgets see the real size of
    each decide (the cost field already prices them lower).
    """
    cost = _num(event.get("total_cost_usd"))
    by_model = event.get("modelUsage")
    models = by_model.values() if isinstance(by_model, dict) else ()
    rows = [r for r in models if isinstance(r, dict)]
    if rows:
        read = sum(_int(r.get("cacheReadInputTokens")) for r in rows)
        written = sum(_int(r.get("cacheCreationInputTokens")) for r in rows)
        tokens_in = sum(_int(r.get("inputTokens")) for r in rows) + read + written
        tokens_out = sum(_int(r.get("outputTokens")) for r in rows)
        if cost is None and any(_num(r.get("costUSD")) is not None for r in rows):
            cost = sum(_num(r.get("costUSD")) or 0.0 for r in rows)
        if tokens_in or tokens_out:
            return Usage(tokens_in, tokens_out, cost, read, written)
    u = event.get("usage")
    if isinstance(u, dict):
        read = _int(u.get("cache_read_input_tokens"))
        written = _int(u.get("cache_creation_input_tokens"))
        tokens_in = _int(u.get("input_tokens")) + read + written
        return Usage(tokens_in, _int(u.get("output_tokens")), cost, read, written)
    return Usage(0, 0, cost) if cost is not None else None


def _billed(error: DecideError, usage: Usage | None) -> DecideError:
    """`error`, carrying what the call that ended in it reported spending."""
    error.usage = usage
    return error


def _object(text: str, usage: Usage | None) -> dict[str, Any]:
    """The move object in a reply the provider billed: an invalid one still carries `usage`."""
    try:
        return parse_object(text)
    except DecideError as exc:
        raise _billed(exc, usage) from None


def _codex(events: list[dict[str, Any]]) -> Parsed:
    text: str | None = None
    error: str | None = None  # an `error` event may be a retry notice; fatal only without a reply
    tokens_in = tokens_out = cached = 0
    metered = False
    for e in events:
        kind = e["type"]
        if kind == "turn.failed":
            err = e.get("error")
            msg = err.get("message") if isinstance(err, dict) else err
            spent = Usage(tokens_in, tokens_out, None, min(cached, tokens_in)) if metered else None
            raise _billed(cli_error(f"codex reported a failed turn: {str(msg)[:300]}"), spent)
        if kind == "error":
            error = str(e.get("message"))[:300]
        if kind == "turn.completed" and isinstance(e.get("usage"), dict):
            metered = True
            tokens_in += _int(e["usage"].get("input_tokens"))  # includes cached input
            cached += _int(e["usage"].get("cached_input_tokens"))
            tokens_out += _int(e["usage"].get("output_tokens"))
        item = e.get("item")
        if (
            kind == "item.completed"
            and isinstance(item, dict)
            and item.get("type") in ("agent_message", "assistant_message")
            and isinstance(item.get("text"), str)
        ):
            text = item["text"]
    usage = Usage(tokens_in, tokens_out, None, min(cached, tokens_in)) if metered else None
    if text is None:
        if error:
            raise _billed(cli_error(f"codex reported an error: {error}"), usage)
        raise _billed(InvalidReply("codex printed no reply"), usage)
    return Parsed(_object(text, usage), text, usage, Source.CODEX)


def _pi(events: list[dict[str, Any]]) -> Parsed:
    text: str | None = None
    error: str | None = None  # the last assistant message failed (pi retries on its own)
    tokens_in = tokens_out = read = written = 0
    cost: float | None = None
    metered = False
    for e in events:
        message = e.get("message")
        if e["type"] != "message_end" or not isinstance(message, dict):
            continue
        if message.get("role") != "assistant":
            continue
        u = message.get("usage")
        if isinstance(u, dict):
            metered = True
            tokens_in += sum(_int(u.get(k)) for k in ("input", "cacheRead", "cacheWrite"))
            read += _int(u.get("cacheRead"))
            written += _int(u.get("cacheWrite"))
            tokens_out += _int(u.get("output"))
            c = u.get("cost")
            total = _num(c.get("total")) if isinstance(c, dict) else None
            if total is not None:
                cost = (cost or 0.0) + total
        error = (
            str(message.get("errorMessage"))[:300] if message.get("stopReason") == "error" else None
        )
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            parts = [
                c["text"]
                for c in content
                if isinstance(c, dict)
                and c.get("type") == "text"
                and isinstance(c.get("text"), str)
            ]
            if parts:
                text = "".join(parts)
    usage = Usage(tokens_in, tokens_out, cost, read, written) if metered else None
    if error is not None:  # pi's message starts with the HTTP status: "429 rate limited …"
        leading = re.match(r"\s*([1-5]\d\d)\b", error)
        status = int(leading[1]) if leading else None
        raise _billed(cli_error(f"pi reported an error: {error}", status=status), usage)
    if text is None:
        raise _billed(InvalidReply("pi printed no assistant message"), usage)
    return Parsed(_object(text, usage), text, usage, Source.PI)
