"""The scheduler: due loops, persistence across restarts, coalesced slots, one live round."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path

import pytest

from looop_py import (
    LoopEngine,
    LoopLevel,
    LoopScheduler,
    LoopSpec,
    RoundOutcome,
    RoundReport,
    Schedule,
)
from looop_py.engine.cadence import ScheduleError
from looop_py.engine.inproc import InMemoryEscalations, InProcessWorkers, done
from looop_py.engine.rounds import Phase
from looop_py.engine.scheduler import ScheduleBook
from looop_py.errors import UsageError
from looop_py.loops.store import RoundFiles, note_report
from looop_py.loops.store import probe as rounds_snapshot
from looop_py.schedules.book import (
    ShelfBook,
    due_loops,
    mark_fired,
    schedules_snapshot,
)
from looop_py.workdir.paths import Paths
from looop_py.workdir.shelf import FilesShelf

T0 = 1_800_000_000.0  # a fixed "now"; every test passes time explicitly


def book_in(root: Path) -> ShelfBook:
    """The schedule book of a work dir at `root` (state/loop-schedule.json)."""
    return ShelfBook(FilesShelf(Paths(root)))


class Sink:
    def __init__(self) -> None:
        self.reports: list[RoundReport] = []
        self.got = threading.Event()

    def deliver(self, report: RoundReport) -> None:
        self.reports.append(report)
        self.got.set()


def make_engine(
    name: str,
    cadence: str,
    level: LoopLevel = LoopLevel.L1_REPORT,
    *,
    store: RoundFiles | None = None,
    polls: int = 0,
    **kw: object,
) -> tuple[LoopEngine, InProcessWorkers]:
    workers = InProcessWorkers(lambda req: done(f"{req.kind} of {req.loop}"), polls=polls)
    spec = LoopSpec(name, f"intent of {name}", level, cadence=cadence)
    eng = LoopEngine(spec, workers, store=store, sleep=lambda s: None, **kw)  # type: ignore[arg-type]
    return eng, workers


# -- the book (pure) ----------------------------------------------------------------------


def test_a_new_loop_waits_for_its_first_slot_then_fires_once_per_slot() -> None:
    every = Schedule.parse("every 60s")
    book = ScheduleBook().sync({"a": every}, T0)
    assert book.due(T0) == [] and book.loops["a"].next_at == T0 + 60
    assert book.due(T0 + 60) == ["a"]
    book = book.fired("a", every, T0 + 60)
    assert book.due(T0 + 60) == [] and book.loops["a"].next_at == T0 + 120
    assert book.loops["a"].fired == 1


def test_missed_slots_coalesce_into_one_run() -> None:
    every = Schedule.parse("every 60s")
    book = ScheduleBook().sync({"a": every}, T0)
    late = T0 + 10 * 3600  # ten hours of missed slots
    assert book.due(late) == ["a"]
    book = book.fired("a", every, late)
    assert book.due(late) == [] and book.due(late + 59) == []
    assert book.due(late + 60) == ["a"] and book.loops["a"].fired == 1


def test_changed_cadence_is_rescheduled_and_removed_loops_forgotten() -> None:
    book = ScheduleBook().sync(
        {"a": Schedule.parse("every 60s"), "b": Schedule.parse("every 1h")}, T0
    )
    book = book.sync({"a": Schedule.parse("every 10m")}, T0 + 30)
    assert set(book.loops) == {"a"}
    assert book.loops["a"].next_at == T0 + 30 + 600 and book.loops["a"].cadence == "every 10m"


def test_book_survives_a_damaged_entry_and_a_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "state" / "loop-schedule.json"
    path.parent.mkdir()
    damaged = {"a": {"cadence": "every 1m"}, "b": {"cadence": "every 1m", "next_at": 5}}
    path.write_text(json.dumps({"v": 1, "loops": damaged}))
    assert set(book_in(tmp_path).load().loops) == {"b"}
    path.write_text("{not json")
    assert book_in(tmp_path).load() == ScheduleBook()


# -- the scheduler ------------------------------------------------------------------------


def test_scheduler_persists_so_a_restart_does_not_refire(tmp_path: Path) -> None:
    def scheduler() -> tuple[LoopScheduler, Sink, InProcessWorkers]:
        sink = Sink()
        eng, workers = make_engine("tick", "every 60s")
        return LoopScheduler(book_in(tmp_path), sink=sink).register(eng), sink, workers

    sched, sink, _ = scheduler()
    assert sched.tick_once(T0) == 0  # first sight: waits for the first slot
    assert sched.tick_once(T0 + 61) == 1
    assert [r.outcome for r in sink.reports] == [RoundOutcome.REPORTED]

    sched, sink, workers = scheduler()  # a restart: new objects, the same state file
    assert sched.tick_once(T0 + 62) == 0 and workers.requests == []
    assert sched.tick_once(T0 + 5 * 3600) == 1  # five hours missed: one run
    assert sched.tick_once(T0 + 5 * 3600 + 1) == 0
    assert len(workers.requests) == 2  # one maker, one checker


def test_fire_new_runs_a_new_loop_at_once_like_the_reference(tmp_path: Path) -> None:
    eng, _ = make_engine("daily", "daily 09:00")
    sched = LoopScheduler(book_in(tmp_path), sink=Sink(), fire_new=True).register(eng)
    assert sched.tick_once(T0) == 1 and sched.tick_once(T0 + 1) == 0


def test_only_reports_worth_reading_are_delivered(tmp_path: Path) -> None:
    from looop_py import AllowlistGate

    sink = Sink()
    quiet, _ = make_engine(
        "quiet", "every 1m", LoopLevel.L3_UNATTENDED, gate=AllowlistGate(["report"])
    )
    loud, _ = make_engine("loud", "every 1m")
    sched = LoopScheduler(None, sink=sink, fire_new=True).register(quiet).register(loud)
    assert sched.tick_once(T0) == 2
    assert [r.loop_name for r in sink.reports] == ["loud"]


def test_a_loop_never_has_two_live_rounds(tmp_path: Path) -> None:
    sink = Sink()
    escalations = InMemoryEscalations()
    store = RoundFiles(FilesShelf(Paths(tmp_path)))
    eng, workers = make_engine(
        "assisted", "every 60s", LoopLevel.L2_ASSISTED, store=store, escalations=escalations
    )
    sched = LoopScheduler(book_in(tmp_path), sink=sink, fire_new=True).register(eng)
    assert sched.tick_once(T0) == 1
    (live,) = store.live()
    assert live.phase is Phase.AWAITING_APPROVAL
    assert [r.outcome for r in sink.reports] == [RoundOutcome.ESCALATED]  # delivered once

    assert sched.tick_once(T0 + 120) == 0  # due, but its round still waits for a human
    assert sched.tick_once(T0 + 240) == 0
    assert len(sink.reports) == 1 and len(store.live()) == 1

    escalations.approve(live.ask_id or "")
    assert sched.tick_once(T0 + 300) == 1  # the old round finishes, then the slot fires once
    assert store.load(live.id).outcome is RoundOutcome.PROCEEDED
    assert len(store.all()) == 2 and len(workers.requests) == 4


def test_non_blocking_ticks_advance_rounds_across_ticks(tmp_path: Path) -> None:
    store = RoundFiles(FilesShelf(Paths(tmp_path)))
    eng, _ = make_engine("slow", "every 1h", store=store, polls=2)
    sink = Sink()
    sched = LoopScheduler(book_in(tmp_path), sink=sink, fire_new=True).register(eng)
    assert sched.tick_once(T0, blocking=False) == 1
    phases = [store.live()[0].phase]
    for i in range(1, 6):
        sched.tick_once(T0 + i, blocking=False)
        phases.append(store.live()[0].phase if store.live() else Phase.DONE)
    assert phases[0] is Phase.MAKER_RUNNING and phases[-1] is Phase.DONE
    assert Phase.CHECKER_RUNNING in phases
    assert [r.outcome for r in sink.reports] == [RoundOutcome.REPORTED]


def test_register_rejects_bad_cadences_and_duplicates() -> None:
    bad, _ = make_engine("bad", "every 0s")
    with pytest.raises(ScheduleError):
        LoopScheduler().register(bad)
    ok, _ = make_engine("ok", "every 1m")
    sched = LoopScheduler().register(ok)
    assert len(sched) == 1 and not sched.is_empty()
    with pytest.raises(UsageError):
        sched.register(ok)
    with pytest.raises(UsageError):
        LoopScheduler(tick_s=0)


def test_spawned_scheduler_runs_until_stopped(tmp_path: Path) -> None:
    sink = Sink()
    eng, _ = make_engine("bg", "every 1h")
    sched = LoopScheduler(book_in(tmp_path), sink=sink, tick_s=0.05, fire_new=True)
    thread, stop = sched.register(eng).spawn(time.time)
    assert sink.got.wait(5)
    stop.set()
    thread.join(5)
    assert not thread.is_alive() and len(sink.reports) == 1


# -- helpers for the pulse -----------------------------------------------------------------


def test_schedule_signal_changes_only_when_a_loop_falls_due_or_fires(tmp_path: Path) -> None:
    path = book_in(tmp_path)
    cadences = {"a": "every 60s", "broken": "every 0s"}
    first = schedules_snapshot(path, cadences, T0)
    assert first["signal"] == {"a": {"due": False, "fired": 0}, "broken": "invalid"}
    assert "positive" in first["detail"]["broken"]["error"]
    assert schedules_snapshot(path, cadences, T0 + 30)["signal"] == first["signal"]
    assert first["detail"]["a"]["due_in_s"] == 60

    assert due_loops(path, cadences, T0 + 60) == ["a"]
    assert schedules_snapshot(path, cadences, T0 + 60)["signal"]["a"] == {
        "due": True,
        "fired": 0,
    }
    mark_fired(path, "a", "every 60s", T0 + 61)
    assert due_loops(path, cadences, T0 + 62) == []
    assert schedules_snapshot(path, cadences, T0 + 62)["signal"]["a"] == {
        "due": False,
        "fired": 1,
    }


def test_rounds_signal_names_only_what_someone_must_act_on(tmp_path: Path) -> None:
    store = RoundFiles(FilesShelf(Paths(tmp_path)))
    escalations = InMemoryEscalations()
    waiting, _ = make_engine(
        "assisted", "every 1h", LoopLevel.L2_ASSISTED, store=store, escalations=escalations
    )
    finished, _ = make_engine("reporter", "every 1h", store=store)
    pending = waiting.run_once()
    finished.run_once()
    (tmp_path / "rounds" / "broken.json").write_text("{")
    snap = rounds_snapshot(store.shelf)
    assert snap["signal"] == {
        "awaiting-approval": [pending.round_id],
        "reports": {},
        "unreadable": ["broken"],
    }
    assert snap["detail"][pending.round_id]["loop"] == "assisted"
    assert snap["detail"][pending.round_id]["phase"] == "awaiting-approval"
    note_report(store.shelf, "reporter", "reporter-1")
    assert (tmp_path / "state" / "round-reports.json").exists()
    assert rounds_snapshot(store.shelf)["signal"]["reports"] == {"reporter": "reporter-1"}
    empty = rounds_snapshot(FilesShelf(Paths(tmp_path / "nowhere")))
    assert empty == {"signal": {"awaiting-approval": [], "reports": {}}, "detail": {}}


def test_the_pulse_side_reads_load_no_round_machinery() -> None:
    import subprocess
    import sys

    code = (
        "import sys, looop_py.schedules.book\n"
        # typing is not pinned: every reader of the book opened a WorkDir, which loads it.
        "heavy = [m for m in ('looop_py.engine.rounds', 'looop_py.engine.spec',"
        " 'looop_py.engine.loop', 'yaml') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


# -- the grid: a late beat does not shift later runs --------------------------------------


def simulate_day(cadence: str, beats: list[float], start: float) -> list[float]:
    """Fire `cadence` on each beat it is due at, as ADVANCE does; the run times."""
    schedule = Schedule.parse(cadence)
    book = ScheduleBook().sync({"a": schedule}, start)
    runs = []
    for now in beats:
        if book.due(now):
            book = book.fired("a", schedule, now)
            runs.append(now)
    return runs


def test_hourly_under_cron_every_minute_runs_24_times_a_day_on_the_hour() -> None:
    start = T0 + 17.3  # registered a little after a beat, as a real goal is
    # cron beats every minute, each starting 0-40 s late (a busy machine), for a day
    beats = [start + 60 * i + (i * 7919 % 41) for i in range(1, 24 * 60 + 1)]
    runs = simulate_day("every 1h", beats, start)
    assert len(runs) == 24
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    assert all(3600 - 60 <= g <= 3600 + 60 for g in gaps), gaps  # jitter only, no drift
    slots = [start + 3600 * (k + 1) for k in range(24)]
    assert all(0 <= run - slot < 101 for run, slot in zip(runs, slots, strict=True))


def test_hourly_under_ten_minute_beats_keeps_hourly_gaps() -> None:
    start = T0
    beats = [start + 600 * i + (i * 7919 % 41) for i in range(1, 6 * 24 * 3 + 1)]  # three days
    runs = simulate_day("every 1h", beats, start)
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    assert len(runs) == 72 and all(3600 - 41 < g < 3600 + 41 for g in gaps)  # jitter, no drift


def test_a_late_run_keeps_the_next_slot_and_a_cadence_change_starts_a_new_grid() -> None:
    hourly = Schedule.parse("every 1h")
    book = ScheduleBook().sync({"a": hourly}, T0)
    book = book.fired("a", hourly, T0 + 3600 + 7 * 60)  # ran 7 minutes late
    assert book.loops["a"].next_at == T0 + 7200
    book = book.fired("a", hourly, T0 + 5 * 3600 + 1)  # looop was down: one run, same grid
    assert book.loops["a"].next_at == T0 + 6 * 3600
    half = Schedule.parse("every 30m")
    book = book.sync({"a": half}, T0 + 5 * 3600 + 100)
    assert book.loops["a"].next_at == T0 + 5 * 3600 + 100 + 1800


@pytest.mark.parametrize("bad", [1e300, float("nan"), float("inf"), -5.0, "soon"])
def test_a_stored_time_no_calendar_can_show_is_dropped_and_rescheduled(bad: object) -> None:
    entry = {"cadence": "every 1m", "next_at": bad}
    late = {"cadence": "every 1m", "next_at": T0, "last_fired": bad}
    ok = {"cadence": "every 1m", "next_at": T0, "last_fired": T0 - 60}
    book = ScheduleBook.from_dict({"v": 1, "loops": {"a": entry, "c": late, "b": ok}})
    assert set(book.loops) == {"b"}
