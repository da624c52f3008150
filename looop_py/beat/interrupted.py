"""A move a dead actor left half-done (state/wal.json): the beat reports it once, under the
pulse lock, and never runs it again (moves/wal.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from looop_py import jsonio
from looop_py.moves import wal
from looop_py.workdir import journal

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir


def report_interrupted(wd: WorkDir, now: float) -> str | None:
    """A move a dead actor left half-done: reported once, never re-run."""
    record = wal.take_interrupted(wd.paths)
    if record is None:
        return None
    move = record.get("move")
    move = move if isinstance(move, dict) else {}  # a damaged record still says: interrupted
    started = record.get("started_at")
    started = started if isinstance(started, int | float) and not isinstance(started, bool) else 0
    text = (
        f"interrupted: a {str(move.get('action', '?'))[:40]} move started at "
        f"{journal.iso(started) if 0 < started < 1e11 else '?'} did not finish"
        " (looop died mid-move); it was not re-run, check its effect by hand"
    )
    journal.write(wd, f"⚠ {text}: {jsonio.canonical(move).decode()[:300]}", now)
    journal.emit(wd, "move_interrupted", now, move=move)
    return text
