"""Is a loop round still live? Asked by the claim reaper, through the beat.

A round holds its target's claim across beats with no process to watch, so
the claim lives as long as its round does. Only the loops side reads
rounds/; this is meant to move into the loops store.
"""

from __future__ import annotations

from looop_py import jsonio
from looop_py.errors import CorruptFile
from looop_py.workdir.paths import Paths


def round_live(paths: Paths, round_id: str) -> bool:
    """Is rounds/<round_id>.json a round not yet done? Unreadable counts as live (fail closed)."""
    try:
        data = jsonio.read_json(paths.rounds / f"{round_id}.json")
    except (CorruptFile, OSError):
        return True  # cannot tell: fail closed
    return isinstance(data, dict) and data.get("phase") != "done"
