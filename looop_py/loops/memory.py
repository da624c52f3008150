"""memory/<loop>.jsonl: each loop's state spine, one JSON line per finished round.

Recall reads only the file's tail, so a loop that has run for years recalls as
fast as a new one. A line is appended with one write(2); a round recorded twice
(it crashed between recording and saving its state) keeps a single line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from looop_py import jsonio
from looop_py.engine.ports import MemoryEntry
from looop_py.ids import check_segment

_DEDUPE_WINDOW = 20  # lines searched for an entry of the same round


@dataclass(frozen=True)
class JsonlMemory:
    directory: Path

    def path(self, loop: str) -> Path:
        return self.directory / f"{check_segment(loop, 'loop name')}.jsonl"

    def recall(self, loop: str, k: int) -> list[MemoryEntry]:
        lines = jsonio.tail_lines(self.path(loop), k)
        return [
            MemoryEntry.from_dict(d) for d in jsonio.iter_json_lines(lines) if isinstance(d, dict)
        ]

    def record(self, loop: str, entry: MemoryEntry) -> None:
        path = self.path(loop)
        if entry.round_id is not None:
            recent = jsonio.iter_json_lines(jsonio.tail_lines(path, _DEDUPE_WINDOW))
            if any(isinstance(d, dict) and d.get("round") == entry.round_id for d in recent):
                return
        self.directory.mkdir(parents=True, exist_ok=True)
        jsonio.append_line(path, entry.to_dict())
