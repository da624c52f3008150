"""state/loop-schedule.json: when each loop is due, kept across restarts.

The pulse reads it on every beat that has loops (ADVANCE and the sys-schedules
probe), so this module loads only the cadence parser and the schedule book.

    sys-schedules  signal {loop: {"due": bool, "fired": n}}; it changes when a
                   loop falls due or fires, so time wakes the loop only then
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from looop_py import jsonio
from looop_py.engine.cadence import Schedule
from looop_py.engine.scheduler import ScheduleBook
from looop_py.errors import CorruptFile, UsageError

# typing is not imported at run time: the pulse loads this module every beat.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def load_book(path: Path) -> ScheduleBook:
    """The book saved at `path`; an unreadable one is rebuilt from the cadences (at
    worst each loop waits one slot)."""
    try:
        return ScheduleBook.from_dict(jsonio.read_json(path, None))
    except CorruptFile:
        return ScheduleBook()


def save_book(path: Path, book: ScheduleBook) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(path, book.to_dict())


@dataclass(frozen=True)
class BookFile:
    """A ScheduleBook kept in one file: the engine's BookStore in a work dir."""

    path: Path

    def load(self) -> ScheduleBook:
        return load_book(self.path)

    def save(self, book: ScheduleBook) -> None:
        save_book(self.path, book)


def _sync_file(
    state_path: Path, cadences: Mapping[str, str], now: float, *, save: bool = True
) -> tuple[ScheduleBook, dict[str, Schedule], dict[str, str]]:
    """Load the book, match it to these cadences, save it if that changed anything."""
    book = load_book(state_path)
    parsed: dict[str, Schedule] = {}
    invalid: dict[str, str] = {}
    for name, text in cadences.items():
        try:
            parsed[name] = Schedule.parse(text)
        except UsageError as exc:
            invalid[name] = exc.message
    synced = book.sync(parsed, now)
    if save and synced != book:
        save_book(state_path, synced)
    return synced, parsed, invalid


def due_loops(state_path: Path, cadences: Mapping[str, str], now: float) -> list[str]:
    """The loops due at `now` (loop name -> cadence text given); the book is kept in sync."""
    return _sync_file(state_path, cadences, now)[0].due(now)


def mark_fired(state_path: Path, name: str, cadence: str, now: float) -> None:
    """Record that `name` fired at `now`: its missed slots are spent, the next is after now."""
    book = load_book(state_path)
    save_book(state_path, book.fired(name, Schedule.parse(cadence), now))


def schedules_snapshot(
    state_path: Path, cadences: Mapping[str, str], now: float, *, save: bool = True
) -> dict[str, Any]:
    """For the sys-schedules probe: each loop's due flag and fire count; bad cadences named.

    The signal changes when a loop falls due or fires, so time wakes the loop
    through this probe only when something is actually due.
    """
    synced, _parsed, invalid = _sync_file(state_path, cadences, now, save=save)
    signal: dict[str, Any] = dict(synced.signal(now))
    detail = synced.detail(now)
    for name, message in invalid.items():
        signal[name] = "invalid"
        detail[name] = {"error": message}
    return {"signal": signal, "detail": detail}
