"""The loop schedule book: when each loop is due, kept across restarts.

It is the shelf's `state/loop-schedule` record (workdir/shelf.py): the file
state/loop-schedule.json on one machine, a key every host shares on etcd, so a
slot one host fired is spent for all of them.

The pulse reads it on every beat that has loops (ADVANCE and the sys-schedules
probe), so this module loads only the cadence parser and the schedule book.

    sys-schedules  signal {loop: {"due": bool, "fired": n}}; it changes when a
                   loop falls due or fires, so time wakes the loop only then
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looop_py.engine.cadence import Schedule
from looop_py.engine.scheduler import ScheduleBook
from looop_py.errors import UsageError
from looop_py.workdir import shelf as shelf_mod

if TYPE_CHECKING:
    from looop_py.engine.scheduler import BookStore
    from looop_py.workdir.context import WorkDir
    from looop_py.workdir.shelf import Shelf


BOOK = "loop-schedule"  # its name among the shelf's `state` records


@dataclass(frozen=True)
class ShelfBook:
    """The work dir's book, on its shelf (files: state/loop-schedule.json): the engine's
    BookStore. An unreadable book is rebuilt from the cadences (at worst each loop waits
    one slot)."""

    shelf: Shelf

    def load(self) -> ScheduleBook:
        return ScheduleBook.from_dict(shelf_mod.read_object(self.shelf, "state", BOOK))

    def save(self, book: ScheduleBook) -> None:
        shelf_mod.write_json(self.shelf, "state", BOOK, book.to_dict())


def book_of(wd: WorkDir) -> ShelfBook:
    return ShelfBook(wd.shelf)


def _sync_file(
    store: BookStore, cadences: Mapping[str, str], now: float, *, save: bool = True
) -> tuple[ScheduleBook, dict[str, Schedule], dict[str, str]]:
    """Load the book, match it to these cadences, save it if that changed anything."""
    book = store.load()
    parsed: dict[str, Schedule] = {}
    invalid: dict[str, str] = {}
    for name, text in cadences.items():
        try:
            parsed[name] = Schedule.parse(text)
        except UsageError as exc:
            invalid[name] = exc.message
    synced = book.sync(parsed, now)
    if save and synced != book:
        store.save(synced)
    return synced, parsed, invalid


def due_loops(store: BookStore, cadences: Mapping[str, str], now: float) -> list[str]:
    """The loops due at `now` (loop name -> cadence text given); the book is kept in sync."""
    return _sync_file(store, cadences, now)[0].due(now)


def mark_fired(store: BookStore, name: str, cadence: str, now: float) -> None:
    """Record that `name` fired at `now`: its missed slots are spent, the next is after now."""
    store.save(store.load().fired(name, Schedule.parse(cadence), now))


def schedules_snapshot(
    store: BookStore, cadences: Mapping[str, str], now: float, *, save: bool = True
) -> dict[str, Any]:
    """For the sys-schedules probe: each loop's due flag and fire count; bad cadences named.

    The signal changes when a loop falls due or fires, so time wakes the loop
    through this probe only when something is actually due.
    """
    synced, _parsed, invalid = _sync_file(store, cadences, now, save=save)
    signal: dict[str, Any] = dict(synced.signal(now))
    detail = synced.detail(now)
    for name, message in invalid.items():
        signal[name] = "invalid"
        detail[name] = {"error": message}
    return {"signal": signal, "detail": detail}
