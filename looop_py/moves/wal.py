"""Write-ahead records for moves that must not run twice (shell, spawn, ask).

The record is written before the move starts and removed when it ends. A
record found at the start of a beat means the actor died mid-move: looop
reports it (journal, events, the decider's LAST FAILURE) and never re-runs it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from looop_py import jsonio
from looop_py.errors import CorruptFile
from looop_py.workdir.paths import Paths


def begin(paths: Paths, move: dict[str, Any], now: float) -> None:
    jsonio.write_json(paths.wal, {"v": 1, "move": move, "started_at": now, "pid": os.getpid()})


def end(paths: Paths) -> None:
    with contextlib.suppress(FileNotFoundError):
        paths.wal.unlink()


def take_interrupted(paths: Paths) -> dict[str, Any] | None:
    """The record a dead actor left behind, removed so it is reported once."""
    path = paths.wal
    if not path.exists():
        return None
    try:
        record = jsonio.read_json(path, None)
    except CorruptFile:
        record = {"move": {"action": "?"}, "started_at": None}
    end(paths)
    return record if isinstance(record, dict) else None
