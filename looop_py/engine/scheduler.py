"""Which loops are due, remembered across restarts; and a scheduler that runs them.

`ScheduleBook` is the policy, pure data (a BookStore persists it; in a work dir
looop_py/loops/schedule.py keeps it in state/loop-schedule.json):

- a loop seen for the first time is due at its first slot after that moment
  (not at once: restarting looop, or adding a daily loop at noon, fires nothing);
- a due loop fires once, and its next slot is the first one after the moment
  it fired on the loop's own grid (`every N`: the slot it was due at plus a
  whole number of N, so a late beat does not shift later runs; wall-clock
  forms: their next time), so however many slots were missed (the machine
  slept, looop was down) they coalesce into that one run;
- a loop whose cadence changed is rescheduled from now; a loop that is gone is
  forgotten.

`LoopScheduler` wraps engines around it: each tick it first moves on the rounds
already live, then starts a round for each due loop that has none (a loop never
has two rounds at once; while one is live, the loop stays due and fires once it
ends), and hands every report worth reading to its sink.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from looop_py.engine.cadence import Schedule
from looop_py.errors import UsageError

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    from looop_py.engine.loop import LoopEngine
    from looop_py.engine.protocols import LoopSink

    class BookStore(Protocol):
        """Where the scheduler keeps its book, so a restart fires nothing early."""

        def load(self) -> ScheduleBook: ...

        def save(self, book: ScheduleBook) -> None: ...

    from looop_py.engine.report import RoundReport
    from looop_py.engine.rounds import RoundState

DEFAULT_TICK_S = 60.0
_LAST_TS = 253402300799.0  # 9999-12-31 23:59:59 UTC: a stored time past it is damage


def _stamp(value: Any) -> float:
    """A stored Unix time, or ValueError for one no clock or calendar could show."""
    ts = float(value)
    if not 0.0 <= ts <= _LAST_TS:  # also false for NaN
        raise ValueError(f"time {value!r} is out of range")
    return ts


@dataclass(frozen=True)
class LoopTiming:
    cadence: str
    next_at: float
    last_fired: float | None = None
    fired: int = 0  # how many times it fired: a period counter for the sys-schedules signal

    def to_dict(self) -> dict[str, Any]:
        return {
            "cadence": self.cadence,
            "next_at": self.next_at,
            "last_fired": self.last_fired,
            "fired": self.fired,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoopTiming:
        last = data.get("last_fired")
        return cls(
            str(data["cadence"]),
            _stamp(data["next_at"]),
            None if last is None else _stamp(last),
            int(data.get("fired") or 0),
        )


@dataclass(frozen=True)
class ScheduleBook:
    loops: Mapping[str, LoopTiming] = field(default_factory=dict)

    # -- policy (pure) ---------------------------------------------------------------

    def sync(
        self, cadences: Mapping[str, Schedule], now: float, *, fire_new: bool = False
    ) -> ScheduleBook:
        """Match the book to the loops that exist now (see the module docstring)."""
        loops: dict[str, LoopTiming] = {}
        for name, schedule in cadences.items():
            known = self.loops.get(name)
            if known is not None and known.cadence == str(schedule):
                loops[name] = known
            elif known is not None:
                loops[name] = replace(known, cadence=str(schedule), next_at=schedule.next_fire(now))
            else:
                first = now if fire_new else schedule.next_fire(now)
                loops[name] = LoopTiming(str(schedule), first)
        return ScheduleBook(loops)

    def due(self, now: float) -> list[str]:
        return [name for name, t in self.loops.items() if t.next_at <= now]

    def fired(self, name: str, schedule: Schedule, now: float) -> ScheduleBook:
        """`name` fired at `now`: its next slot is the first one on its grid strictly after now."""
        known = self.loops.get(name)
        if known is None or known.cadence != str(schedule):
            known = LoopTiming(str(schedule), now)  # a new grid, anchored at this run
        timing = replace(
            known,
            cadence=str(schedule),
            next_at=schedule.next_slot(known.next_at, now),
            last_fired=now,
            fired=known.fired + 1,
        )
        return ScheduleBook({**self.loops, name: timing})

    def signal(self, now: float) -> dict[str, Any]:
        """For the sys-schedules probe: changes when a loop falls due or fires, not with time."""
        return {
            name: {"due": t.next_at <= now, "fired": t.fired}
            for name, t in sorted(self.loops.items())
        }

    def detail(self, now: float) -> dict[str, Any]:
        return {
            name: {
                "cadence": t.cadence,
                "next_at": t.next_at,
                "due_in_s": max(0, round(t.next_at - now)),
                "last_fired": t.last_fired,
            }
            for name, t in sorted(self.loops.items())
        }

    # -- persistence -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"v": 1, "loops": {n: t.to_dict() for n, t in sorted(self.loops.items())}}

    @classmethod
    def from_dict(cls, data: Any) -> ScheduleBook:
        if not isinstance(data, dict) or not isinstance(data.get("loops"), dict):
            return cls()
        loops: dict[str, LoopTiming] = {}
        for name, entry in data["loops"].items():
            try:
                loops[str(name)] = LoopTiming.from_dict(entry)
            except (AttributeError, KeyError, TypeError, ValueError):
                continue  # one damaged entry is rescheduled, the rest are kept
        return cls(loops)


class StdoutSink:
    """Prints each delivered report."""

    def deliver(self, report: RoundReport) -> None:
        print(report.render(), flush=True)


class LoopScheduler:
    """Runs registered loops on their cadences; the book in `store` survives restarts.

    Rounds run one after another in registration order. `tick_once(now,
    blocking=False)` never waits for a worker: it starts and advances rounds
    only as far as they can go now, for a caller that ticks often (the pulse).
    """

    def __init__(
        self,
        store: BookStore | None = None,
        *,
        tick_s: float = DEFAULT_TICK_S,
        sink: LoopSink | None = None,
        fire_new: bool = False,
    ) -> None:
        if tick_s <= 0:
            raise UsageError(f"the scheduler tick must be positive, got {tick_s}")
        self.store = store
        self.tick_s = tick_s
        self.sink: LoopSink = sink if sink is not None else StdoutSink()
        self.fire_new = fire_new
        self._entries: dict[str, tuple[LoopEngine, Schedule]] = {}
        self._book = store.load() if store is not None else ScheduleBook()
        self._saved = False

    def register(self, engine: LoopEngine) -> LoopScheduler:
        """Add a loop. A cadence that does not parse is an error here, not a silent drop."""
        name = engine.spec.name
        if name in self._entries:
            raise UsageError(f"loop {name!r} is registered twice")
        if not engine.spec.cadence:
            raise UsageError(
                f"loop {name!r} has no cadence: it runs only on demand",
                "run it with run_once(), or give it a cadence to schedule it",
            )
        self._entries[name] = (engine, Schedule.parse(engine.spec.cadence))
        return self

    def __len__(self) -> int:
        return len(self._entries)

    def is_empty(self) -> bool:
        return not self._entries

    @property
    def book(self) -> ScheduleBook:
        return self._book

    def due(self, now: float) -> list[str]:
        return self._synced(now).due(now)

    def _synced(self, now: float) -> ScheduleBook:
        cadences = {name: schedule for name, (_, schedule) in self._entries.items()}
        return self._book.sync(cadences, now, fire_new=self.fire_new)

    def _save(self) -> None:
        if self.store is not None:
            self.store.save(self._book)
        self._saved = True

    def tick_once(self, now: float, *, blocking: bool = True) -> int:
        """Advance live rounds, fire due loops; returns how many rounds were started."""
        synced = self._synced(now)
        if synced != self._book or not self._saved:
            self._book = synced
            self._save()
        started = 0
        for name, (engine, schedule) in self._entries.items():
            live = engine.live_rounds()
            for state in live:
                self._settle(engine, state, blocking, now)
            if name not in self._book.due(now) or any(r.live for r in engine.live_rounds()):
                continue
            # Mark it fired before the round runs: a crash mid-round leaves a live
            # round to resume, not a slot to fire a second time.
            self._book = self._book.fired(name, schedule, now)
            self._save()
            started += 1
            try:
                state = engine.start_round(trigger="cadence", now=now)
            except Exception as exc:  # one loop's broken store must not stop the others
                self.sink.deliver(engine.failed_report(f"could not start a round: {exc}"))
                continue
            self._settle(engine, state, blocking, now)
        return started

    def _settle(self, engine: LoopEngine, state: RoundState, blocking: bool, now: float) -> None:
        # Rounds are imported here, not at the top: the pulse reads the schedule
        # book on quiet beats, and those must not pay for the whole engine.
        from looop_py.engine.report import RoundOutcome
        from looop_py.engine.rounds import Phase

        before = state.phase
        try:
            state = engine.drive(state) if blocking else engine.settle(state, now)
        except Exception as exc:
            report = replace(
                state.report(), outcome=RoundOutcome.FAILED, error=f"the round broke: {exc}"
            )
            self.sink.deliver(report)
            return
        # Deliver once, when a round comes to rest: answered, or waiting for a human.
        resting = state.phase in (Phase.DONE, Phase.AWAITING_APPROVAL)
        if resting and state.phase is not before:
            report = state.report()
            if report.should_deliver():
                self.sink.deliver(report)

    def run_forever(self, stop: threading.Event, clock: Callable[[], float]) -> None:
        """tick, wait `tick_s`, repeat, until `stop` is set. `clock` gives each tick's now."""
        while not stop.is_set():
            self.tick_once(clock())
            stop.wait(self.tick_s)

    def spawn(self, clock: Callable[[], float]) -> tuple[threading.Thread, threading.Event]:
        """Run in a daemon thread; set the returned event to stop it after the current tick."""
        stop = threading.Event()
        thread = threading.Thread(
            target=self.run_forever, args=(stop, clock), name="looop-scheduler", daemon=True
        )
        thread.start()
        return thread, stop
