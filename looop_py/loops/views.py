"""What `looop loops` and `looop rounds` report, as plain data."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from looop_py import jsonio
from looop_py.errors import CorruptFile
from looop_py.workdir.paths import Paths


def _round_files(paths: Paths, include_done: bool) -> list[Path]:
    dirs = [paths.rounds] + ([paths.rounds / "done"] if include_done else [])
    found: list[Path] = []
    for d in dirs:
        try:
            with os.scandir(d) as it:
                found += [Path(e.path) for e in it if e.name.endswith(".json") and e.is_file()]
        except FileNotFoundError:
            continue
    return found


def _rows(paths: Paths, include_done: bool) -> list[dict[str, Any]]:
    rows = []
    for path in _round_files(paths, include_done):
        try:
            data = jsonio.read_json(path)
        except CorruptFile:
            continue
        if not isinstance(data, dict) or (data.get("phase") == "done" and not include_done):
            continue
        rows.append(
            {
                "id": data.get("id"),
                "loop": data.get("loop") or (data.get("spec") or {}).get("name"),
                "phase": data.get("phase"),
                "outcome": data.get("outcome"),
                "trigger": data.get("trigger"),
                "started_at": data.get("started_at"),
                "ended_at": data.get("ended_at"),
                "tokens": int(data.get("input_tokens") or 0) + int(data.get("output_tokens") or 0),
                "ask": data.get("ask") if data.get("phase") == "awaiting-approval" else None,
                "error": data.get("error"),
            }
        )
    rows.sort(key=lambda r: (r["started_at"] or 0, r["id"] or ""))
    return rows


def list_rounds(paths: Paths, *, include_done: bool) -> list[dict[str, Any]]:
    return _rows(paths, include_done)


def overview(paths: Paths, now: float) -> dict[str, Any]:
    from looop_py.engine.scheduler import ScheduleBook
    from looop_py.engine.spec import load_loops
    from looop_py.loops import index as loopindex

    specs, errors = load_loops(paths)
    book = ScheduleBook.load(loopindex.schedule_book(paths))
    rounds = _rows(paths, include_done=True)
    out = []
    for spec in specs:
        mine = [r for r in rounds if r["loop"] == spec.name]
        last = next((r for r in reversed(mine) if r["outcome"]), None)
        timing = book.loops.get(spec.name)
        next_at = timing.next_at if timing else None
        out.append(
            {
                "name": spec.name,
                "level": spec.level.label,
                "cadence": spec.cadence,
                "action": spec.action_kind,
                "next_fire": time.strftime("%Y-%m-%d %H:%M", time.localtime(next_at))
                if next_at
                else None,
                "next_fire_ts": next_at,
                "last_outcome": last["outcome"] if last else None,
                "live_round": next((r["id"] for r in mine if r["phase"] != "done"), None),
                "rounds": len(mine),
                "tokens": sum(r["tokens"] for r in mine),
            }
        )
    return {"loops": out, "errors": errors}
