"""journal.md: one human line per executed move. events.jsonl: one machine line per event."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.glyphs import visible
from looop_py.logfile import iso as iso  # noqa: PLC0414 - re-exported: the journal's callers
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir


def one_line(text: str, limit: int = 500) -> str:
    """Collapse newlines so one move can never forge a second journal entry; show what
    a terminal would obey or hide (glyphs.py)."""
    flat = " ".join(visible(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def write(wd: WorkDir, text: str, now: float) -> str:
    """One line for a human; the config's secrets redacted (workdir/environ.py)."""
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(now))
    line = f"- {stamp} {one_line(wd.redact(text))}"
    jsonio.append_text(wd.paths.journal, (line + "\n").encode("utf-8"))
    return line


def tail(paths: Paths, n: int) -> list[str]:
    return [line.decode("utf-8", "replace") for line in jsonio.tail_lines(paths.journal, n)]


def from_iso(text: Any) -> float | None:
    """The Unix time of an `iso()` string; None for anything else."""
    import calendar  # only to read a time back (`looop doctor`)

    if not isinstance(text, str) or not text.endswith("Z"):
        return None
    whole, _, frac = text[:-1].partition(".")
    try:
        t = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
        return t + (int(frac) / 1000 if frac.isdigit() else 0.0)
    except ValueError:
        return None


def emit(wd: WorkDir, event: str, now: float, **fields: Any) -> None:
    """One line for a machine; the config's secrets redacted (workdir/environ.py)."""
    record = {"ts": iso(now), "event": event, **fields}
    jsonio.append_text(wd.paths.events, wd.redact_bytes(jsonio.dumps(record) + b"\n"))


def recent_events(paths: Paths, n: int = 200) -> list[dict[str, Any]]:
    return [
        e for e in jsonio.iter_json_lines(jsonio.tail_lines(paths.events, n)) if isinstance(e, dict)
    ]


def last_event(paths: Paths, event: str, scan: int = 500) -> dict[str, Any] | None:
    return next((e for e in reversed(recent_events(paths, scan)) if e.get("event") == event), None)


ERRORS_ROTATE_BYTES = 1024 * 1024


def log_bug(paths: Paths, what: str, now: float) -> None:
    """Append the exception being handled, with its traceback, to state/errors.log.

    For a bug looop survived (a step of the beat, a probe): the beat goes on, and
    the traceback is where a human or a bug report can find it, not in cron mail.
    """
    import traceback  # only when a step or a probe broke

    text = f"--- {iso(now)} {what} failed; the beat went on\n{traceback.format_exc()}\n"
    try:
        paths.state.mkdir(exist_ok=True)
        jsonio.append_text(paths.error_log, text.encode(), rotate_bytes=ERRORS_ROTATE_BYTES)
    except OSError:
        pass  # a full disk must not turn a survived bug into a crash
