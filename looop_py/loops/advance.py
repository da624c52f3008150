"""ADVANCE, the pulse's loop step, and the other ways a round starts and runs.

    engine_for   a LoopEngine for one loop, wired to this work dir
    advance      ADVANCE: step every live round as far as it can go without
                 waiting, then start a round for each loop whose cadence fell due
    start_round  begin a round now (a `start_round` move, the rules decider)
    run          `looop run`: one round in the foreground

None of them calls a model, but their workers do: while the daily budget
([limits] daily_tokens / daily_usd, counted over decides and every worker) is
spent, no round starts. A due loop stays due, held (`looop loops` shows
`held: budget`), and starts once the budget allows; a live round finishes.
Loop cadences are indexed by goal-file stat, so a quiet beat never parses YAML.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from looop_py.coord.choose import coordinator
from looop_py.engine.actions import action_commands
from looop_py.engine.loop import LoopEngine
from looop_py.errors import Busy, FenceLost, LooopError, RoundLive
from looop_py.locks import PulseLock
from looop_py.loops import store
from looop_py.loops.adapters import (
    MailboxApprovals,
    RoundClaims,
    RoundWorkspaces,
    SessionWorkers,
    worker_claim,
)
from looop_py.loops.executor import CommandActionExecutor
from looop_py.loops.index import cadences, index
from looop_py.loops.specs import load_spec
from looop_py.schedules.book import book_of, due_loops, mark_fired
from looop_py.spend import ledger
from looop_py.workdir import journal
from looop_py.workdir.environ import child_env

if TYPE_CHECKING:
    from looop_py.engine.report import RoundReport
    from looop_py.engine.rounds import RoundState
    from looop_py.engine.spec import LoopSpec
    from looop_py.workdir.context import WorkDir


def engine_for(wd: WorkDir, spec: LoopSpec, clock: Callable[[], float] = time.time) -> LoopEngine:
    config = wd.config
    return LoopEngine(
        spec,
        SessionWorkers(wd, clock),
        executor=CommandActionExecutor(
            action_commands(config.actions),
            cwd=wd.paths.root,
            env=child_env(wd.paths, config=config),
            confirm=lambda kind: action_fence(wd, kind, spec.name, clock()),
        ),
        memory=store.memory_of(wd),
        claims=RoundClaims(wd, clock),
        escalations=MailboxApprovals(wd, clock),
        workspaces=RoundWorkspaces(wd),
        store=store.rounds_of(wd),
        clock=clock,
    )


class AlreadyLive(RoundLive):
    """The loop has a live round: a start finds it and starts nothing (exit 3), saying where
    the first one is and what it waits for, never queued behind it. A decide's
    `start_round` takes it as done (the round it wanted runs), never as a failure."""

    def __init__(self, loop: str, state: RoundState) -> None:
        hint = "it goes on by itself at each beat; `looop rounds` shows where it is"
        if state.ask_id and state.phase.value == "awaiting-approval":
            hint = f"it waits for a human: looop approve {state.ask_id} (or deny it)"
        super().__init__(
            f"loop {loop} already has a live round ({state.id}, {state.phase.value})", hint
        )
        self.state = state


def action_fence(wd: WorkDir, kind: str, loop: str, now: float) -> dict[str, str]:
    """Before a round's action command starts: the fence confirmed, and its token for the
    command's environment. FenceLost: it does not start, the journal says so with the token
    (and the beat ends there: nothing more of it is written)."""
    try:
        fencing = wd.shelf.confirm(f"action {kind}")
    except FenceLost as exc:
        token = "?" if exc.token is None else exc.token
        text = (
            f"✗ decided loop {loop}'s action {kind}, not acted: lost the pulse at token"
            f" {token} ({exc.message})"
        )
        journal.write(wd, text, now)
        journal.emit(wd, "action_fenced", now, loop=loop, kind=kind, token=exc.token)
        raise
    return fencing.env() if fencing is not None else {}


class BudgetHeld(LooopError):
    """The daily budget is spent: no round starts until it allows one again."""


def budget_hold(wd: WorkDir, now: float) -> str | None:
    """Why no round may start now (the daily budget is spent), or None."""
    return ledger.held(wd, now)


def _refuse_if_held(wd: WorkDir, loop: str, now: float) -> None:
    why = budget_hold(wd, now)
    if why is not None:
        raise BudgetHeld(
            f"loop {loop} is held: {why}",
            "a round starts once the budget allows (tomorrow, or raise [limits] in looop.toml)",
        )


def start_round(
    wd: WorkDir,
    loop: str,
    *,
    now: float,
    trigger: str,
    target: str | None = None,
) -> RoundState:
    """Begin a round of `loop` and take its first steps (it never waits here); refused
    (BudgetHeld) while the daily budget is spent."""
    _refuse_if_held(wd, loop, now)
    spec = load_spec(wd, loop)
    if target is not None:
        spec = spec.with_target(target)
    engine = engine_for(wd, spec, clock=lambda: now)
    with _one_start(wd):
        _refuse_if_live(engine, loop)
        state = engine.start_round(trigger=trigger, now=now)
    settled = engine.settle(state, now)
    round_ended(wd, settled, now)  # a round that could not get going ends here, and says why
    return settled


@contextlib.contextmanager
def _one_start(wd: WorkDir) -> Iterator[None]:
    """One round start at a time in this work dir, so "no live round" still holds when the
    new one is saved: two `looop run`s, or a run and a beat, never both start one."""
    wd.paths.state.mkdir(exist_ok=True)
    lock = PulseLock(wd.paths.state / "round-start.lock")
    if not lock.acquire(timeout_s=30):
        raise Busy("another round start has held the lock for 30 s", "try again")
    try:
        yield
    finally:
        lock.release()


def _refuse_if_live(engine: LoopEngine, loop: str) -> None:
    """One live round per loop: a second start is refused (AlreadyLive)."""
    live = engine.live_rounds()
    if live:
        raise AlreadyLive(loop, live[0])


def advance(wd: WorkDir, now: float) -> list[dict[str, Any]]:
    """ADVANCE: step every live round; start the rounds whose cadence fell due."""
    events: list[dict[str, Any]] = []
    rounds = store.rounds_of(wd)
    for state in rounds.live():
        if _worker_elsewhere(wd, rounds, state, now):
            continue  # its worker runs on another host, which steps it on its next beat
        try:
            spec = state.spec
            engine = engine_for(wd, spec, clock=lambda: now)
            new = engine.settle(state, now)
        except FenceLost:
            raise  # this beat lost the pulse: nothing more of it may be written
        except Exception as exc:  # one broken round must not stop the beat
            events.append({"event": "round_error", "round": state.id, "message": repr(exc)})
            continue
        if new.phase != state.phase and not round_ended(wd, new, now):
            events.append(_round_event(new))
    store.archive_done(rounds.shelf, now)
    cadenced = cadences(index(wd))
    if cadenced:
        book = book_of(wd)
        hold: list[str | None] = []  # the budget, read once and only when a loop may start
        for loop in due_loops(book, cadenced, now):
            if rounds.live(loop):
                continue  # stays due; fires once its live round ends
            if not hold:
                hold.append(budget_hold(wd, now))
            if hold[0] is not None:
                continue  # stays due, held; fires once the budget allows
            # The slot is spent either way: a loop that cannot start is not retried every beat.
            mark_fired(book, loop, cadenced[loop], now)
            try:
                state = start_round(wd, loop, now=now, trigger="cadence")
            except FenceLost:
                raise  # as above
            except LooopError as exc:
                _not_started(wd, loop, exc, now)
                continue
            events.append(
                {"event": "round_started", "loop": loop, "round": state.id, "by": "cadence"}
            )
            if state.live and state.phase.value != "recall":  # an end was told by start_round
                events.append(_round_event(state))
    return events


def _worker_elsewhere(wd: WorkDir, rounds: store.RoundFiles, state: RoundState, now: float) -> bool:
    """Is the round's maker or checker another host's, running or ended moments ago? Only that
    host can read its session, so only it steps the round. The worker's claim
    (SessionWorkers) lives as long as the worker and HANDOVER_S after, while its host lives:
    when the host dies, the claim's lease lapses and any host may step the round on (its
    poll then finds the session gone, and the round fails with that reason)."""
    shelf = rounds.shelf
    if not shelf.shared or state.phase.value not in ("maker-running", "checker-running"):
        return False
    if store.host_of(shelf, state.id) in (None, shelf.host):
        return False
    handle = state.maker_handle if state.phase.value == "maker-running" else state.checker_handle
    if handle is None:
        return False
    view = coordinator(wd).get(worker_claim(handle), now)
    return bool(view and view.live)


def _round_event(state: RoundState) -> dict[str, Any]:
    event: dict[str, Any] = {"event": "round_step", "round": state.id, "phase": state.phase.value}
    if state.outcome is not None:
        event["outcome"] = state.outcome.value
        if state.error:
            event["error"] = state.error
    return event


def round_ended(wd: WorkDir, state: RoundState, now: float) -> bool:
    """When `state` has just ended, whichever way and whoever drove it (a beat, `looop run`,
    an approval): its journal line (so `looop report` and the page show it), its
    `round_step` event, and the one change that wakes the decider (sys-rounds). Told once:
    a round already told is not told again. False while the round is live."""
    if state.live or state.outcome is None:
        return False
    shelf = wd.shelf
    if store.reports(shelf).get(state.loop) == state.id:
        return False  # told already (another door drove it to the same end)
    outcome = state.outcome.value
    if outcome in store.REPORTED:
        store.note_report(shelf, state.loop, state.id)
    mark = "" if outcome in ("reported", "proceeded") else "✗ "
    why = f": {state.error}" if state.error else ""
    journal.write(wd, f"{mark}round {state.id} of {state.loop} ended {outcome}{why}", now)
    event = _round_event(state)
    journal.emit(wd, str(event.pop("event")), now, **event)
    return True


def _not_started(wd: WorkDir, loop: str, exc: LooopError, now: float) -> None:
    journal.emit(wd, "round_not_started", now, loop=loop, message=str(exc))
    journal.write(wd, f"✗ loop {loop}: no round started: {exc}", now)


def run(wd: WorkDir, loop: str, *, wait_for_human: bool = False) -> RoundReport:
    """`looop run`: one round in the foreground, driven to its end (or to a human), which is
    told like any other (`round_ended`); refused (BudgetHeld) while the daily budget is
    spent, and a round that cannot start is journaled with why."""
    try:
        _refuse_if_held(wd, loop, time.time())
        spec = load_spec(wd, loop)
        engine = engine_for(wd, spec)
        with _one_start(wd):
            _refuse_if_live(engine, loop)
            state = engine.start_round(trigger="manual")
    except RoundLive:
        raise  # the loop's round runs: nothing to tell but the refusal itself
    except LooopError as exc:
        _not_started(wd, loop, exc, time.time())
        raise
    report = engine.resume(state.id, wait_for_human=wait_for_human)
    with contextlib.suppress(LooopError, OSError):  # unreadable now: the printed report stands
        round_ended(wd, engine.load(state.id), time.time())
    return report
