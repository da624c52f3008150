"""One beat of the loop, step by step as design.md §1 tells it.

    0. REAP     settle dead workers (verify, worktree) and reap dead claims, logged
    1. SENSE    run sensors and probes, write snapshots
    2. DIFF     hash the wake-relevant world; unchanged → skip, no decider
    3. ADVANCE  deterministic housekeeping (filled by the workers/engine issues)
    4. DECIDE   ask the decider for one move
    5. ACT      validate and execute it; commit the world hash

The world hash is committed only after a usable decision, so a beat whose
decide failed is retried by the next one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from looop_py import jsonio, procs
from looop_py.beat import seal
from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.beat.sense import Committed, World, commit, load_committed, sense
from looop_py.errors import Unavailable
from looop_py.locks import PulseLock
from looop_py.loops import index as loopindex
from looop_py.moves import wal
from looop_py.workdir import config as config_mod
from looop_py.workdir import goals, journal, shelf
from looop_py.workdir.paths import Paths, has_entries
from looop_py.world import diff

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.beat.quiet import Handover
    from looop_py.beat.shared import Fence

Clock = Callable[[], float]


# -- steps ---------------------------------------------------------------------


def why_decide(
    last: Committed, world: World, *, force: bool, now: float, noop_ttl_s: float
) -> str | None:
    """Why this beat must decide, or None to skip. Pure."""
    if world.hash != last.hash:
        return "changed"
    if force:
        return "force"
    if last.next_wake is not None and now >= last.next_wake:
        return "next-interval"
    if (
        noop_ttl_s > 0
        and last.action == "noop"
        and last.at is not None
        and now - last.at >= noop_ttl_s
    ):
        return "noop-ttl"
    return None


# -- one beat ------------------------------------------------------------------


@contextmanager
def terminate_cleanly() -> Iterator[None]:
    """SIGTERM/SIGHUP end the beat like Ctrl-C does, so sensor groups get killed."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def beat(
    paths: Paths,
    *,
    force: bool = False,
    clock: Clock = time.time,
    decider: Any = None,
    handover: Handover | None = None,
) -> BeatResult:
    """Run one beat; returns what happened. Never raises for a broken sensor.

    `handover`: a quiet attempt that found a change gives its lock and its
    sensors' runs (beat/quiet.py); the beat goes on from there.
    """
    started = time.monotonic()
    paths.state.mkdir(exist_ok=True)
    lock = handover.lock if handover else PulseLock(paths.pulse_lock)
    if not handover and not lock.acquire():
        result = BeatResult(BeatOutcome.LOCKED, reason="another pulse is running")
        journal.emit(paths, "beat", clock(), outcome=BeatOutcome.LOCKED.value)
        return result
    try:
        with terminate_cleanly():
            ran = handover.runs if handover else None
            return _beat_locked(
                paths, force=force, clock=clock, decider=decider, started=started, ran=ran
            )
    finally:
        procs.kill_running()
        lock.release()


def _beat_locked(
    paths: Paths,
    *,
    force: bool,
    clock: Clock,
    decider: Any,
    started: float,
    ran: dict[str, procs.Result] | None,
) -> BeatResult:
    seal.break_seal(str(paths.root))
    cfg = config_mod.load(paths.config, paths.config_cache)

    def body(fence: Fence | None) -> BeatResult:
        return _beat_body(
            paths, cfg, fence, force=force, clock=clock, decider=decider, started=started, ran=ran
        )

    if cfg.coordination.backend == "files":
        return body(None)
    from looop_py.beat import shared  # a shared backend only: a beat on files never loads it

    return shared.beat_shared(paths, cfg, body, clock=clock, started=started)


def _beat_body(
    paths: Paths,
    cfg: config_mod.Config,
    fence: Fence | None,
    *,
    force: bool,
    clock: Clock,
    decider: Any,
    started: float,
    ran: dict[str, procs.Result] | None,
) -> BeatResult:
    """SENSE to ACT; `fence` (a shared backend) keeps the committed world and guards its commit.

    On a shared backend no quiet seal is written: another host may commit meanwhile, so
    every beat there takes the pulse and reads the shared world (beat/quiet.py never skips).
    """
    now = clock()
    jsonio.sweep_temp_files(paths.snapshots, older_than_s=600, now=now)
    jsonio.sweep_temp_files(paths.state, older_than_s=600, now=now)

    interrupted = _report_interrupted(paths, now)
    if not shelf.of(paths).empty("approved"):  # approvals their approver did not run (rare)
        from looop_py.moves import approvals

        _emit_steps(
            paths, now, "approval_failed", lambda: approvals.carry_out_pending(paths, cfg, now)
        )

    with goals.one_scan():  # goals/ listed once for ADVANCE, the probes and the hash
        # 0. REAP and ADVANCE — before SENSE, so the probes already see what they settled.
        failed = housekeep(paths, cfg, now) + advance_loops(paths, cfg, now)

        # 1. SENSE
        world = sense(paths, cfg, now, ran=ran)
        loop_wake = _loop_wake(paths)  # the index is built once per scan: for the seal
    failed += [
        f"probe {stem}"
        for stem, snap in world.snapshots.items()
        if stem.startswith("sys-") and snap.get("signal") == {"error": "probe-failed"}
    ]
    _record_failures(paths, failed, now)

    # 2. DIFF
    last = load_committed(paths) if fence is None else fence.load_committed()
    if fence is not None:
        world = fence.scope(world, last)  # host-local readings, each under its host's name
    changed = tuple(diff(last.items, world.items))
    reason = why_decide(last, world, force=force, now=now, noop_ttl_s=cfg.limits.noop_ttl_s)
    forced_by = None if reason == "changed" else reason
    base = BeatResult(
        BeatOutcome.SKIPPED,
        world_hash=world.hash,
        prev_hash=last.hash,
        changed=changed,
        readings=world.readings,
        forced=force,
        forced_by=forced_by,
        failed_steps=tuple(failed),
    )
    if reason is None:
        shelf.of(paths).delete("state", shelf.FLAP)  # a skipped beat breaks every streak
        if fence is None:
            _seal(paths, cfg, world, last, loop_wake)
        return _finish(paths, base, started, clock, cfg)

    if fence is not None and not fence.held():
        return _finish(
            paths, replace(base, outcome=BeatOutcome.LOCKED, reason=fence.LOST), started, clock, cfg
        )

    # 4. DECIDE and 5. ACT
    from looop_py import deciders  # deciding only: a quiet beat never loads a backend
    from looop_py.beat.decide import decide_and_act

    verdict = decide_and_act(
        paths,
        cfg,
        seen=world,
        changed=changed,
        now=now,
        clock=clock,
        backend=decider if decider is not None else deciders.load(cfg),
        forced_by=forced_by,
        interrupted=interrupted,
    )
    result = replace(
        base,
        outcome=verdict.outcome,
        move=verdict.move,
        journal=verdict.journal,
        reason=verdict.reason,
        decide=verdict.stats,
    )
    if verdict.outcome is BeatOutcome.DECIDED:
        action = (verdict.move or {}).get("action")
        if fence is None:
            committed = commit(paths, world, now, action, verdict.next_wake)
            _seal(paths, cfg, world, committed, loop_wake)
        elif not fence.commit(world, now, action, verdict.next_wake):
            result = replace(result, outcome=BeatOutcome.FAILED, reason=fence.LOST)
    return _finish(paths, result, started, clock, cfg)


def _loop_wake(paths: Paths) -> float | None:
    """When the first loop cadence falls due (ADVANCE then starts a round): inf with no
    cadence, None when the schedule book does not know a loop's next slot."""
    due = loopindex.cadences(loopindex.index(paths))
    if not due:
        return float("inf")
    from looop_py.loops import schedule  # loaded already: ADVANCE ran with these loops

    book = schedule.book_of(paths).load().loops
    if not all(name in book for name in due):
        return None
    return min(book[name].next_at for name in due)


def _seal(
    paths: Paths,
    cfg: config_mod.Config,
    world: World,
    committed: Committed,
    loop_wake: float | None,
) -> None:
    """Let the next beat prove from the seal that nothing changed (beat/seal.py)."""
    from looop_py.beat import probes  # loaded already: SENSE ran them
    from looop_py.workdir import environ  # loaded already: SENSE built the sensors' env

    def rounds_signal() -> str:
        snap = probes.rounds(probes.Seen(paths, time.time(), ()))
        return jsonio.canonical(snap.get("signal")).decode()

    def sessions_now() -> tuple[str, float] | None:
        """sys-sessions now, and when the first ended session is pruned; None while one is
        live or unsettled (housekeeping still has work to do on it)."""
        now = time.time()
        seen = probes.Seen(paths, now, ())
        signal = jsonio.canonical(probes.sessions(seen).get("signal")).decode()
        prune_at = float("inf")
        if not seen.sessions:
            return signal, prune_at
        from looop_py.workers import records  # loaded already: the probe listed sessions

        for view in seen.sessions:
            status = records.read_record(paths.sessions / view.id / records.STATUS)
            # reap.housekeeping's rule: a settled session is pruned ttl after it ended.
            ended = jsonio.number(status.get("ended_at")) or jsonio.number(
                status.get("finalized_at")
            )
            if view.alive or not status.get("finalized_at") or ended is None:
                return None
            prune_at = min(prune_at, ended + cfg.workers.session_ttl_s)
        return signal, prune_at

    seal.seal(
        str(paths.root),
        cfg,
        world,
        committed,
        removed_env=environ.secret_names(os.environ, cfg),
        looop_bin=environ.looop_bin(),
        loop_wake=loop_wake,
        rounds_signal=rounds_signal,
        sessions_now=sessions_now,
    )


def _report_interrupted(paths: Paths, now: float) -> str | None:
    """A move a dead actor left half-done: reported once, never re-run."""
    record = wal.take_interrupted(paths)
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
    journal.write(paths, f"⚠ {text}: {jsonio.canonical(move).decode()[:300]}", now)
    journal.emit(paths, "move_interrupted", now, move=move)
    return text


def housekeep(paths: Paths, cfg: config_mod.Config, now: float) -> list[str]:
    """Set aside records that do not fit, reap dead sessions, verify ended workers, then
    reap dead claims; one event line each. Returns the steps that failed."""
    failed: list[str] = []
    # The usual quiet beat has none of these: nothing to look at, nothing to import.
    record_dirs = (paths.rounds, paths.sessions, paths.claims, paths.asks, paths.answers)
    if any(has_entries(d) for d in record_dirs):
        from looop_py.beat import corrupt  # only when there are records to check

        failed += _emit_steps(
            paths, now, "check-records", lambda: corrupt.check_records(paths, now)
        )
    if has_entries(paths.sessions):
        from looop_py.workers import reap  # only when sessions/ has entries

        failed += _emit_steps(
            paths, now, "reap-sessions", lambda: reap.housekeeping(paths, cfg, now)
        )
    if has_entries(paths.claims):
        from functools import partial  # only when claims/ has entries

        from looop_py.claims import reaper
        from looop_py.loops import store

        round_live = partial(store.is_live, shelf.of(paths))
        failed += _emit_steps(
            paths, now, "reap-claims", lambda: reaper.reap(paths, now, round_live)
        )
    return failed


def advance_loops(paths: Paths, cfg: config_mod.Config, now: float) -> list[str]:
    """Step live loop rounds and start the due ones; no model is asked (design.md §5)."""
    if not loopindex.index(paths) and shelf.of(paths).empty("rounds"):
        return []  # no loops and no rounds: nothing heavy to import
    from looop_py.loops import advance  # the engine loads only when loops exist

    return _emit_steps(paths, now, "advance", lambda: advance.advance(paths, cfg, now))


# What each step's failure event was called before steps were named (kept for readers).
_FAILURE_EVENTS = {"advance": "advance_failed", "check-records": "check_failed"}


def _emit_steps(
    paths: Paths, now: float, step: str, run: Callable[[], list[dict[str, Any]]]
) -> list[str]:
    """Run a step and log each thing it did; a bug in it must not stop the beat.

    A step that raises is a bug made visible: its traceback goes to
    state/errors.log, an event names it, and the beat reports it in
    `failed_steps`. Returns [step] when it failed, else [].
    """
    try:
        events = run()
        failed = []
    except Unavailable:
        raise  # the shared backend is gone: the whole beat is skipped (beat/shared.py)
    except Exception as exc:
        journal.log_bug(paths, f"step {step}", now)
        name = _FAILURE_EVENTS.get(step, "housekeeping_failed")
        events = [{"event": name, "step": step, "message": repr(exc)}]
        failed = [step]
    for event in events:
        journal.emit(paths, str(event.pop("event")), now, **event)
    return failed


def _record_failures(paths: Paths, failed: list[str], now: float) -> None:
    """Keep the last failed steps in state/ for `looop status`; a clean beat clears them."""
    if failed:
        record = {"v": 1, "at": now, "steps": failed, "log": "state/errors.log"}
        with contextlib.suppress(OSError):
            jsonio.write_json(paths.step_failures, record, durable=False)
        return
    with contextlib.suppress(FileNotFoundError):
        paths.step_failures.unlink()


def _finish(
    paths: Paths, result: BeatResult, started: float, clock: Clock, cfg: config_mod.Config
) -> BeatResult:
    result = replace(result, duration_s=time.monotonic() - started)
    record = result.to_json()
    record.pop("journal", None)
    # events.jsonl grows every beat, forever: name only the sensors that changed or failed.
    changed = {c.item for c in result.changed}
    noted = {
        r.stem.removeprefix("sensor-")
        for r in result.readings
        if not r.ok or f"snap:{r.stem}" in changed
    }
    record["sensors"] = {n: d for n, d in record["sensors"].items() if n in noted}
    record["sensors_steady"] = len(result.readings) - len(record["sensors"])
    journal.emit(paths, "beat", clock(), **record)
    if cfg.notify.command:
        from looop_py.beat import notify  # only with a [notify] command configured

        notify.notify(paths, cfg, result, clock())
    return result
