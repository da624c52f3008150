"""One beat of the loop, its steps in the order `_beat_body` runs them.

    0. under the pulse lock: sweep temp files, report a move a dead actor left
       half-done (never re-run), carry out approvals their approver did not
    1. REAP     set aside records that do not fit, settle dead workers (verify,
                worktree), reap dead claims; each logged
    2. ADVANCE  step live loop rounds and start the due ones; no model is asked
    3. SENSE    run sensors and probes, write snapshots; record the steps that failed
    4. DIFF     hash the wake-relevant world; unchanged → skip: no decider, and a
                quiet seal for the next beat (sensing/seal.py; on etcd with a fingerprint
                of the shared keys, coord/etcdseal.py)
    5. DECIDE   ask the decider for one move, within the spend limits
    6. ACT      validate and execute it; commit the world hash (and seal it)
    7. log the beat in events.jsonl, and run the [notify] command if one is set

REAP and ADVANCE come before SENSE, so the probes already see what they settled.
A plain `looop pulse` tries beat/quiet.py first: when the seal holds, none of this runs.
The world hash is committed only after a usable decision, so a beat whose
decide failed is retried by the next one.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from looop_py import jsonio, procs
from looop_py.beat import retention, vouch
from looop_py.beat.interrupted import report_interrupted
from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.errors import Unavailable
from looop_py.locks import PulseLock
from looop_py.loops import index as loopindex
from looop_py.sensing import probes, seal
from looop_py.sensing.sense import Committed, World, commit, load_committed, sense
from looop_py.workdir import environ, goals, journal, shelf
from looop_py.workdir.paths import Paths, has_entries
from looop_py.world import diff

if TYPE_CHECKING:
    import signal as _signal

    from looop_py.beat.quiet import Handover
    from looop_py.beat.shared import Fence
    from looop_py.coord.etcdseal import Fingerprint
    from looop_py.sensing.seal import Sessions
    from looop_py.sensing.survey import Listed
    from looop_py.workdir.context import WorkDir
    from looop_py.workdir.goalfile import GoalFile
    from looop_py.workdir.watched import Vouch
else:
    try:  # the C half of `signal` (as in procs.py): its wrapper builds three IntEnums, ~1 ms
        import _signal
    except ImportError:  # an interpreter without it
        import signal as _signal

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

    previous = {s: _signal.signal(s, interrupt) for s in (_signal.SIGTERM, _signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            _signal.signal(s, handler)


def beat(
    wd: WorkDir,
    *,
    force: bool = False,
    decider: Any = None,
    handover: Handover | None = None,
    goals_from: Vouch | None = None,
) -> BeatResult:
    """Run one beat; returns what happened. Never raises for a broken sensor.

    `handover`: a quiet attempt that found a change gives its lock and its
    sensors' runs (beat/quiet.py); the beat goes on from there. `goals_from`: an inotify
    watch on goals/ (`looop up`, ops/goalwatch.py): the beat takes goals/ as it vouches for
    it, with no lstat per goal, when it does (workdir/watched.py).
    """
    started = handover.started if handover else time.monotonic()
    wd.paths.state.mkdir(exist_ok=True)
    lock = handover.lock if handover else PulseLock(wd.paths.pulse_lock)
    if not handover and not lock.acquire():
        result = BeatResult(BeatOutcome.LOCKED, reason="another pulse is running")
        journal.emit(wd, "beat", wd.clock(), outcome=BeatOutcome.LOCKED.value)
        return result
    try:
        with terminate_cleanly():
            ran = handover.runs if handover else None
            return _beat_locked(
                wd, force=force, decider=decider, started=started, ran=ran, vouch=goals_from
            )
    finally:
        procs.kill_running()
        lock.release()


def _beat_locked(
    wd: WorkDir,
    *,
    force: bool,
    decider: Any,
    started: float,
    ran: dict[str, procs.Result] | None,
    vouch: Vouch | None = None,
) -> BeatResult:
    seal.break_seal(str(wd.paths.root))
    cfg = wd.config

    def body(fence: Fence | None) -> BeatResult:
        return _beat_body(
            wd, fence, force=force, decider=decider, started=started, ran=ran, vouch=vouch
        )

    if cfg.coordination.backend == "files":
        return body(None)
    from looop_py.beat import shared  # a shared backend only: a beat on files never loads it

    return shared.beat_shared(wd, body, started=started)


def _beat_body(
    wd: WorkDir,
    fence: Fence | None,
    *,
    force: bool,
    decider: Any,
    started: float,
    ran: dict[str, procs.Result] | None,
    vouch: Vouch | None = None,
) -> BeatResult:
    """SENSE to ACT; `fence` (a shared backend) keeps the committed world and guards its commit.

    On a shared backend the seal also holds a fingerprint of the shared keys, taken before
    anything shared is read and again at the end; it is written only when no host wrote a
    key in between, and the quiet beat (beat/quiet.py) skips only while that holds.
    """
    cfg = wd.config
    now = wd.clock()
    shared_mark = fence.mark() if fence else None  # before anything shared is read: the seal's
    jsonio.sweep_temp_files(wd.paths.snapshots, older_than_s=600, now=now)
    jsonio.sweep_temp_files(wd.paths.state, older_than_s=600, now=now)

    interrupted = report_interrupted(wd, now)
    if not wd.shelf.empty("approved"):  # approvals their approver did not run (rare)
        from looop_py.moves import approvals

        _emit_steps(wd, now, "approval_failed", lambda: approvals.carry_out_pending(wd, now))

    with wd.memo.scope():  # goals/ listed once for ADVANCE, the probes and the hash
        if vouch is not None:  # as `looop up`'s watch vouches for it: no lstat per goal
            goals.list_with(wd, vouch)
        # 1. REAP and 2. ADVANCE — before SENSE, so the probes already see what they settled.
        failed = housekeep(wd, now) + advance_loops(wd, now)

        # 3. SENSE
        world = sense(wd, now, ran=ran)
        loop_wake, busy = _loop_wake(wd)  # the index is built once per scan: for the seal
        sealer = partial(_seal, listed=goals.for_seal(wd))  # goals/ listed, for the seal
        if not wd.shelf.empty("asks"):  # a broken-sensor ask whose sensors read again
            from looop_py.beat.healed import close_healed

            failed += _emit_steps(wd, now, "healed", lambda: close_healed(wd, world.snapshots, now))
    failed += [
        f"probe {stem}"
        for stem, snap in world.snapshots.items()
        if stem.startswith("sys-") and snap.get("signal") == {"error": "probe-failed"}
    ]
    _record_failures(wd.paths, failed, now)

    # 4. DIFF
    last = load_committed(wd.paths) if fence is None else fence.load_committed()
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
        wd.shelf.delete("state", shelf.FLAP)  # a skipped beat breaks every streak
        if fence is None or shared_mark is not None:
            sealer(wd, world, last, loop_wake, busy, fence=fence, shared_mark=shared_mark)
        return _finish(wd, base, started)

    if fence is not None and not fence.held():
        return _finish(wd, replace(base, outcome=BeatOutcome.LOCKED, reason=fence.LOST), started)

    # 5. DECIDE and 6. ACT
    from looop_py import deciders  # deciding only: a quiet beat never loads a backend
    from looop_py.beat.decide import decide_and_act

    verdict = decide_and_act(
        wd,
        seen=world,
        changed=changed,
        now=now,
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
            committed = commit(wd.paths, world, now, action, verdict.next_wake)
            sealer(wd, world, committed, loop_wake, busy)
        elif not fence.commit(world, now, action, verdict.next_wake):
            result = replace(result, outcome=BeatOutcome.FAILED, reason=fence.LOST)
    return _finish(wd, result, started)


def _loop_wake(wd: WorkDir) -> tuple[float | None, frozenset[str]]:
    """When the first loop cadence falls due (ADVANCE then starts a round): inf with no
    cadence, None when the schedule book does not know a loop's next slot; and the loops
    left out, each with a live round: it is not started at its slot but stays due until
    the round ends, which the seal vouches only a full beat does (vouch.rounds_now)."""
    due = loopindex.cadences(loopindex.index(wd))
    if not due:
        return float("inf"), frozenset()
    from looop_py.schedules.book import book_of  # loaded already: ADVANCE ran

    book = book_of(wd).load().loops
    if not all(name in book for name in due):
        return None, frozenset()
    busy: frozenset[str] = frozenset()
    if not wd.shelf.empty("rounds"):
        from looop_py.loops import store  # loaded already: ADVANCE stepped the rounds

        busy = frozenset(state.loop for state in store.rounds_of(wd).live()) & set(due)
    wakes = (book[name].next_at for name in due if name not in busy)
    return min(wakes, default=float("inf")), busy


def _seal(
    wd: WorkDir,
    world: World,
    committed: Committed,
    loop_wake: float | None,
    busy: frozenset[str],
    *,
    listed: Callable[[Sequence[GoalFile]], Listed | None],
    fence: Fence | None = None,
    shared_mark: Fingerprint | None = None,
) -> None:
    """Let the next beat prove from the seal that nothing changed (sensing/seal.py); on a
    shared backend, with the fingerprint of its keys taken as the beat started. `busy`:
    the loops whose slot `loop_wake` left out, each with a live round."""

    cfg = wd.config

    rounds = cache(partial(vouch.rounds_now, wd, busy))  # once, when the seal first asks

    def round_workers() -> dict[str, tuple[int, float] | None] | None:
        return None if (found := rounds()) is None else found[1]

    def sessions_now() -> Sessions | None:
        """sys-sessions now; when the first ended session is pruned or live one may turn
        stuck; each live worker and its output log's mtime. None while one is unsettled
        (housekeeping still has work to do on it) or its health rests on more than that."""
        now = time.time()
        seen = probes.Seen(wd, now, ())
        signal = jsonio.canonical(probes.sessions(seen).get("signal")).decode()
        if not seen.sessions:
            return signal, float("inf"), [], []
        return vouch.sessions_now(wd, signal, seen.sessions)

    seal.seal(
        str(wd.paths.root),
        cfg,
        world,
        committed,
        removed_env=environ.secret_names(os.environ, cfg),
        looop_bin=environ.looop_bin(),
        loop_wake=loop_wake,
        rounds_now=lambda: None if (found := rounds()) is None else found[0],
        sessions_now=sessions_now,
        claims_now=partial(vouch.claims_now, wd, round_workers),
        asks_now=partial(vouch.asks_now, wd),
        shared_now=partial(fence.settled, shared_mark) if fence else lambda: None,
        sessions_key=f"snap:sys-sessions@{fence.coord.host}" if fence else "snap:sys-sessions",
        goals_listed=lambda: listed(world.goals),
    )


def housekeep(wd: WorkDir, now: float) -> list[str]:
    """Set aside records that do not fit, reap dead sessions, verify ended workers, then
    reap dead claims; one event line each. Returns the steps that failed."""
    failed: list[str] = []
    # The usual quiet beat has none of these: nothing to look at, nothing to import.
    record_dirs = (
        wd.paths.rounds,
        wd.paths.sessions,
        wd.paths.claims,
        wd.paths.asks,
        wd.paths.answers,
    )
    if any(has_entries(d) for d in record_dirs):
        from looop_py.beat import corrupt  # only when there are records to check

        failed += _emit_steps(wd, now, "check-records", lambda: corrupt.check_records(wd, now))
    if has_entries(wd.paths.sessions):
        from looop_py.workers import reap  # only when sessions/ has entries

        failed += _emit_steps(wd, now, "reap-sessions", lambda: reap.housekeeping(wd, now))
    # History past its retention: one small state read unless an hourly look is due.
    failed += _emit_steps(wd, now, "retention", lambda: retention.step(wd, now))
    if has_entries(wd.paths.claims):
        from looop_py.coord import reaper  # only when claims/ has entries
        from looop_py.loops import store

        round_live = partial(store.is_live, wd.shelf)
        failed += _emit_steps(
            wd, now, "reap-claims", lambda: reaper.reap(wd.paths, now, round_live)
        )
    return failed


def advance_loops(wd: WorkDir, now: float) -> list[str]:
    """Step live loop rounds and start the due ones; no model is asked (docs/loops.md)."""
    if not loopindex.index(wd) and wd.shelf.empty("rounds"):
        return []  # no loops and no rounds: nothing heavy to import
    from looop_py.loops import advance  # the engine loads only when loops exist

    return _emit_steps(wd, now, "advance", lambda: advance.advance(wd, now))


# What each step's failure event was called before steps were named (kept for readers).
_FAILURE_EVENTS = {"advance": "advance_failed", "check-records": "check_failed"}


def _emit_steps(
    wd: WorkDir, now: float, step: str, run: Callable[[], list[dict[str, Any]]]
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
        journal.log_bug(wd.paths, f"step {step}", now)
        name = _FAILURE_EVENTS.get(step, "housekeeping_failed")
        events = [{"event": name, "step": step, "message": repr(exc)}]
        failed = [step]
    for event in events:
        journal.emit(wd, str(event.pop("event")), now, **event)
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


def _finish(wd: WorkDir, result: BeatResult, started: float) -> BeatResult:
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
    journal.emit(wd, "beat", wd.clock(), **record)
    if wd.config.notify.command:
        from looop_py.beat import notify  # only with a [notify] command configured

        notify.notify(wd, result, wd.clock())
    return result
