"""What the pulse's system probes and its ADVANCE step need from the engine, cheaply.

The pulse runs these on every beat, quiet ones included, so this module loads
only the cadence parser and the schedule book: rounds are read as raw JSON,
never as RoundState objects.

    sys-rounds     signal {round id: phase} of each live round
    sys-schedules  signal {loop: {"due": bool, "fired": n}}; it changes when a
                   loop falls due or fires, so time wakes the loop only then
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from looop_py import jsonio
from looop_py.engine.cadence import Schedule
from looop_py.engine.scheduler import ScheduleBook
from looop_py.errors import CorruptFile, UsageError
from looop_py.ids import is_safe_segment

# typing is not imported at run time: the pulse loads this module every beat.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def rounds_snapshot(directory: Path) -> dict[str, Any]:
    """Each live round's phase in the signal; loop, start, tokens and ask in detail."""
    signal: dict[str, str] = {}
    detail: dict[str, Any] = {}
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        names = []
    for name in names:
        rid = name.removesuffix(".json")
        if rid == name or not is_safe_segment(rid):
            continue
        try:
            data = jsonio.read_json(directory / name)
        except (CorruptFile, OSError):
            signal[rid] = "unreadable"
            continue
        if not isinstance(data, dict) or data.get("phase") == "done":
            continue
        signal[rid] = str(data.get("phase"))
        detail[rid] = {
            "loop": data.get("loop"),
            "started_at": data.get("started_at"),
            "tokens": (data.get("input_tokens") or 0) + (data.get("output_tokens") or 0),
            "ask": data.get("ask"),
        }
    return {"signal": signal, "detail": detail}


def _sync_file(
    state_path: Path, cadences: Mapping[str, str], now: float
) -> tuple[ScheduleBook, dict[str, Schedule], dict[str, str]]:
    """Load the book, match it to these cadences, save it if that changed anything."""
    book = ScheduleBook.load(state_path)
    parsed: dict[str, Schedule] = {}
    invalid: dict[str, str] = {}
    for name, text in cadences.items():
        try:
            parsed[name] = Schedule.parse(text)
        except UsageError as exc:
            invalid[name] = exc.message
    synced = book.sync(parsed, now)
    if synced != book:
        synced.save(state_path)
    return synced, parsed, invalid


def due_loops(state_path: Path, cadences: Mapping[str, str], now: float) -> list[str]:
    """The loops due at `now` (loop name -> cadence text given); the book is kept in sync."""
    return _sync_file(state_path, cadences, now)[0].due(now)


def mark_fired(state_path: Path, name: str, cadence: str, now: float) -> None:
    """Record that `name` fired at `now`: its missed slots are spent, the next is after now."""
    book = ScheduleBook.load(state_path)
    book.fired(name, Schedule.parse(cadence), now).save(state_path)


def schedules_snapshot(state_path: Path, cadences: Mapping[str, str], now: float) -> dict[str, Any]:
    """For the sys-schedules probe: each loop's due flag and fire count; bad cadences named.

    The signal changes when a loop falls due or fires, so time wakes the loop
    through this probe only when something is actually due.
    """
    synced, _parsed, invalid = _sync_file(state_path, cadences, now)
    signal: dict[str, Any] = dict(synced.signal(now))
    detail = synced.detail(now)
    for name, message in invalid.items():
        signal[name] = "invalid"
        detail[name] = {"error": message}
    return {"signal": signal, "detail": detail}
