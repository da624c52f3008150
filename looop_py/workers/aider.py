"""What an aider worker left in its session directory: its usage and its final word.

aider prints prose, not a JSON stream, and exits 0 even when no request got an answer.
The built-in runtime (runtimes.AIDER) has it write two files into the session dir:

- `aider.events.jsonl` (`--analytics-log`, kept on disk with analytics off): one JSON event
  a line. `message_send_starting` opens each request to the model; `message_send` follows
  one that was answered, with its `prompt_tokens`, `completion_tokens` (the provider's
  counts, as the runtime does not stream; aider's own estimate only from a server that
  sends none) and `cost` (0 when aider knows no price).
- `aider.chat.md` (`--chat-history-file`): the prompt as `#### ` lines, aider's own notes
  and errors as `> ` lines, the model's replies as plain text.

A request left without its `message_send` failed: the run is `blocked`, in aider's own
words (its `> ` lines after the last reply). Otherwise the model's last reply is the final
word, and its `STATUS: done|done-with-concerns|blocked: summary` line (the contract for
runtimes without commands asks for one) says how it went; without that line the run is
done-with-concerns, as exiting alone never counts as success.
"""

from __future__ import annotations

import re

from looop_py import jsonio

# typing is not imported at run time: the supervisor starts with every worker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

EVENTS = "aider.events.jsonl"
CHAT = "aider.chat.md"
STATUSES = ("done", "done-with-concerns", "blocked")
_STATUS = re.compile(r"^\W*STATUS\W*:?\s*(done-with-concerns|done|blocked)\b\W*(.*)$", re.I)
_ERROR_LINES = 2  # aider's last notes after a failed request: the error and its gloss
_NOT_ERRORS = ("Tokens:", "Retrying in")  # its notes on a reply and on a retry
# aider 0.86.2 retries a failed request itself, doubling a delay up to a hard-coded 60 s
# (no flag, setting or variable): 9 tries, each retried twice by openai's client, so 27
# requests over ~64 s on a persistent 5xx. Its first "Retrying in" line comes after its
# HTTP client's own tries (3 requests, a 429's Retry-After waited out); the supervisor
# stops aider there (looop owns retries), and the run ends blocked in aider's words.
# Its retry line is told from the model's words in the same output (a reply may quote it)
# by where it stands: it ends what aider has written (aider sleeps right after it), in a
# block of lines that holds litellm's error, with no blank line between them.
_RETRY_LINE = re.compile(rb"^Retrying in \d+\.\d seconds\.\.\.$")
_ERROR = b"litellm."
_BLOCK = 20  # lines of the current block kept to look for the error in
STOPPED = (
    "aider's request failed after its HTTP client's own tries; looop stopped aider's own"
    " retries (about a minute more of them): looop retries the round"
)


class RetryWatch:
    """Counts aider's retry lines in its output as it grows: fed the new bytes, it keeps
    the unfinished last line and the current block of lines for the next feed."""

    def __init__(self) -> None:
        self.retries = 0
        self._rest = b""
        self._block: list[bytes] = []

    def feed(self, data: bytes) -> int:
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        for i, raw in enumerate(lines):
            line = raw.strip()
            if not line:
                self._block = []
                continue
            last = i == len(lines) - 1 and not self._rest
            if last and _RETRY_LINE.match(line) and any(b.startswith(_ERROR) for b in self._block):
                self.retries += 1
            self._block = [*self._block[-_BLOCK:], line]
        return self.retries


def usage(session_dir: Path) -> dict[str, Any] | None:
    """Tokens and cost summed over the replies aider got; None when it got none."""
    sent = received = 0
    cost = 0.0
    replies = 0
    for event in _events(session_dir):
        if event.get("event") != "message_send":
            continue
        props = event.get("properties")
        props = props if isinstance(props, dict) else {}
        replies += 1
        sent += _int(props.get("prompt_tokens"))
        received += _int(props.get("completion_tokens"))
        c = props.get("cost")
        cost += float(c) if isinstance(c, int | float) and not isinstance(c, bool) else 0.0
    if not replies:
        return None
    return {
        "input_tokens": sent,
        "output_tokens": received,
        "total_tokens": sent + received,
        "cost_usd": cost or None,  # aider reports 0 for a model it has no price for
        "source": "aider-events",
    }


def final(session_dir: Path, log: Path) -> tuple[str, bool, str] | None:
    """(text, error, status) from aider's files; None when it left neither."""
    events = _events(session_dir)
    chat = _after_prompt(session_dir / CHAT)
    if not events and chat is None:
        return None
    kinds = [e.get("event") for e in events]
    starts = [i for i, k in enumerate(kinds) if k == "message_send_starting"]
    failed = bool(starts) and "message_send" not in kinds[starts[-1] :]
    crashed = any(k == "message_send_exception" for k in kinds)
    reply, notes = _last_reply(chat or [])
    if failed or crashed or not reply:
        said = [n for n in notes if not n.startswith(_NOT_ERRORS)][-_ERROR_LINES:]
        why = " ".join(said) or _tail(log) or "aider got no reply from the model"
        return why, True, ""
    for line in reversed(reply.splitlines()):
        m = _STATUS.match(line.strip())
        if m:
            status = m.group(1).lower()
            return m.group(2).strip() or reply, False, status
    return f"no STATUS line in aider's last reply, which says: {reply}", False, STATUSES[1]


def _events(session_dir: Path) -> list[dict[str, Any]]:
    try:
        raw = (session_dir / EVENTS).read_bytes()
    except OSError:
        return []
    out = []
    for line in raw.splitlines():
        try:
            event = jsonio.loads(line)
        except jsonio.JSONDecodeError:
            continue
        if isinstance(event, dict):
            out.append(event)
    return out


def _after_prompt(chat: Path) -> list[str] | None:
    """The chat history's lines after the prompt (the first run of `#### ` lines)."""
    try:
        lines = chat.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    i = 0
    while i < len(lines) and not lines[i].startswith("#### "):
        i += 1
    while i < len(lines) and lines[i].startswith("#### "):
        i += 1
    return [line.rstrip() for line in lines[i:]]


def _last_reply(lines: list[str]) -> tuple[str, list[str]]:
    """The model's last reply (a run of plain lines) and aider's notes (`> ` lines) after it."""
    reply: list[str] = []
    notes: list[str] = []
    block: list[str] = []
    for line in lines:
        if line.startswith(">"):
            if any(b.strip() for b in block):
                reply, notes = block, []
            block = []
            notes.append(line.lstrip("> ").strip())
        else:
            block.append(line)
    if any(b.strip() for b in block):
        reply, notes = block, []
    return "\n".join(reply).strip(), [n for n in notes if n]


def _tail(log: Path) -> str:
    """The last lines of the worker's output, when aider's own files say nothing."""
    lines = [ln.strip() for ln in jsonio.tail_lines(log, 4)]  # its lines wrap at 80 columns
    return " ".join(ln.decode("utf-8", "replace") for ln in lines if ln)


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
