"""What an agent CLI's JSON stream says about its run: usage, and its final word.

A worker's output.log holds the CLI's stream. Read once when the worker ends
(by its supervisor), it gives the tokens and cost the CLI reported and the
CLI's final envelope: claude's `result` line, codex's last agent message (or
its `turn.failed`), pi's last assistant message. A worker that never called
`looop done` still gets a true result from that envelope. aider writes no JSON stream:
its usage and final word come from the files it leaves in the session dir (aider.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from looop_py import jsonio
from looop_py.workers import aider

# typing is not imported at run time: the supervisor starts with every worker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path
    from typing import Any

KINDS = ("", "claude", "codex", "pi", "aider")
READS_TURNS = ("claude", "codex", "pi")  # the streams tool_calls() counts iterations in
MAX_SUMMARY = 500


@dataclass
class Final:
    text: str  # the CLI's last message, or its error
    error: bool  # the CLI says the run failed
    status: str = ""  # how it went, in the agent's own last words ("" = from error and exit)


@dataclass
class Stream:
    usage: dict[str, Any] | None = None
    final: Final | None = None
    # claude: each API message's usage by id, for a run stopped before its `result` line
    # (one message comes as several assistant events that repeat its usage)
    messages: dict[str, dict[str, Any]] | None = None


def read(kind: str, log: Path) -> Stream:
    """Usage and final envelope from a runtime's JSON stream ("" = it prints none)."""
    out = Stream()
    if kind not in KINDS or not kind:
        return out
    if kind == "aider":  # no stream: the files aider wrote beside the log
        said = aider.final(log.parent, log)
        return Stream(aider.usage(log.parent), Final(*said) if said else None)
    try:
        f = log.open("rb")
    except FileNotFoundError:
        return out
    with f:
        for event in _events(f):
            _READERS[kind](event, out)
    if out.usage is None and out.messages:  # stopped mid-run (an iteration cap): sum them
        out.usage = _claude_usage(list(out.messages.values()), None)
    return out


def _claude_usage(usages: list[dict[str, Any]], cost: Any) -> dict[str, Any]:
    read = sum(_int(u.get("cache_read_input_tokens")) for u in usages)
    written = sum(_int(u.get("cache_creation_input_tokens")) for u in usages)
    inp = sum(_int(u.get("input_tokens")) for u in usages) + read + written
    return _usage(inp, sum(_int(u.get("output_tokens")) for u in usages), cost, read, written)


def _claude(event: dict[str, Any], out: Stream) -> None:
    if event.get("type") == "assistant":
        message = _dict(event.get("message"))
        if isinstance(message.get("id"), str) and isinstance(message.get("usage"), dict):
            out.messages = out.messages or {}
            out.messages[message["id"]] = message["usage"]  # the last event of it wins
        return
    if event.get("type") != "result":
        return
    u = _dict(event.get("usage"))
    read, written = (
        _int(u.get("cache_read_input_tokens")),
        _int(u.get("cache_creation_input_tokens")),
    )
    inp, outp = _int(u.get("input_tokens")) + read + written, _int(u.get("output_tokens"))
    # modelUsage counts every model the run called (side calls too), and is all that keeps
    # the counts after a cut stream (its `usage` then says 0): it wins when it has any.
    rows = [r for r in _dict(event.get("modelUsage")).values() if isinstance(r, dict)]
    by_model = [sum(_int(r.get(k)) for r in rows) for k in _MODEL_USAGE]
    if by_model[0] + by_model[1]:
        read, written = by_model[2], by_model[3]
        inp, outp = by_model[0] + read + written, by_model[1]
    cost = event.get("total_cost_usd", event.get("cost_usd"))
    # the last result line wins
    out.usage = _usage(inp, outp, cost, read, written)
    text = event.get("result")
    error = bool(event.get("is_error")) or event.get("subtype") not in (None, "success")
    why = text if isinstance(text, str) and text else str(event.get("subtype", ""))
    out.final = Final(why, error)


_MODEL_USAGE = ("inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")


def _codex(event: dict[str, Any], out: Stream) -> None:
    kind = event.get("type")
    if kind == "turn.completed" and isinstance(event.get("usage"), dict):
        u = event["usage"]
        before = out.usage or _usage(0, 0, None)
        out.usage = _usage(
            before["input_tokens"] + _int(u.get("input_tokens")),  # cached input included
            before["output_tokens"] + _int(u.get("output_tokens")),
            None,
            before["cache_read_tokens"] + _int(u.get("cached_input_tokens")),
        )
    elif kind == "turn.failed":
        err = event.get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        out.final = Final(str(msg), True)
    item = _dict(event.get("item"))
    said = item.get("type") in ("agent_message", "assistant_message")
    if kind == "item.completed" and said and isinstance(item.get("text"), str):
        out.final = Final(item["text"], False)


def _pi(event: dict[str, Any], out: Stream) -> None:
    message = event.get("message")
    if event.get("type") != "message_end" or not isinstance(message, dict):
        return
    if message.get("role") != "assistant":
        return
    u = _dict(message.get("usage"))
    before = out.usage or _usage(0, 0, None)
    total = _dict(u.get("cost")).get("total")
    cost = before["cost_usd"]
    if isinstance(total, int | float) and not isinstance(total, bool):
        cost = (cost or 0.0) + float(total)
    out.usage = _usage(
        before["input_tokens"] + sum(_int(u.get(k)) for k in ("input", "cacheRead", "cacheWrite")),
        before["output_tokens"] + _int(u.get("output")),
        cost,
        before["cache_read_tokens"] + _int(u.get("cacheRead")),
        before["cache_write_tokens"] + _int(u.get("cacheWrite")),
    )
    if message.get("stopReason") == "error":
        out.final = Final(str(message.get("errorMessage")), True)
        return
    content = message.get("content")
    parts = (
        [c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
        if isinstance(content, list)
        else [content]
        if isinstance(content, str)
        else []
    )
    if parts:
        out.final = Final("".join(parts), False)


_READERS = {"claude": _claude, "codex": _codex, "pi": _pi}


# -- iterations: how many times the agent went round its loop ---------------------------

# codex items that are a tool call (one model turn that continues the run)
_CODEX_TOOL_ITEMS = frozenset(
    {"command_execution", "mcp_tool_call", "file_change", "web_search", "local_shell_call"}
)


def tool_calls(kind: str, event: dict[str, Any]) -> int:
    """How many tool calls one stream event announces: each is an iteration the agent
    takes (it asks the model again once the tool answers). 0 for anything else."""
    if kind == "claude":
        message = _dict(event.get("message"))
        if event.get("type") != "assistant" or message.get("role", "assistant") != "assistant":
            return 0
        return _blocks(message.get("content"), "tool_use")
    if kind == "codex":
        item = _dict(event.get("item"))
        return int(event.get("type") == "item.started" and item.get("type") in _CODEX_TOOL_ITEMS)
    if kind == "pi":
        message = _dict(event.get("message"))
        if event.get("type") != "message_end" or message.get("role") != "assistant":
            return 0
        return _blocks(message.get("content"), "toolCall")
    return 0


def _blocks(content: Any, kind: str) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for c in content if isinstance(c, dict) and c.get("type") == kind)


@dataclass
class TurnCounter:
    """Counts a running worker's iterations from its output.log as it grows: fed the new
    bytes, it keeps the unfinished last line for the next feed."""

    kind: str
    turns: int = 0
    _rest: bytes = b""

    def feed(self, data: bytes) -> int:
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        if len(self._rest) > 1 << 22:  # a line past 4 MiB is no event we count
            self._rest = b""
        for event in _events(lines):
            self.turns += tool_calls(self.kind, event)
        return self.turns


def _events(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects among a stream's lines; anything else (a CLI's plain text, a torn
    line) is skipped, as a stream reader must."""
    for line in lines:
        if not line.startswith(b"{"):
            continue
        try:
            event = jsonio.loads(line)
        except jsonio.JSONDecodeError:
            continue
        if isinstance(event, dict):
            yield event


def _usage(inp: int, outp: int, cost: Any, read: int = 0, written: int = 0) -> dict[str, Any]:
    """Input counts every prompt token; the cache's share of it is named beside."""
    return {
        "input_tokens": inp,
        "output_tokens": outp,
        "total_tokens": inp + outp,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "cost_usd": float(cost) if isinstance(cost, int | float) else None,
        "source": "stream",
    }


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def derived_result(stream: Stream, exit_code: int | None, now: float) -> dict[str, Any] | None:
    """result.json for a worker that ended without `looop done`, from its final envelope."""
    final = stream.final
    if final is None:
        return None
    ok = exit_code == 0 and not final.error
    text = " ".join(final.text.split())
    summary = text if len(text) <= MAX_SUMMARY else text[: MAX_SUMMARY - 1] + "…"
    return {
        "status": (final.status or "done") if ok else "blocked",
        "summary": summary,
        "at": now,
        "source": "envelope",  # looop read it from the CLI's output; the worker did not report
        "exit_code": exit_code,
    }
