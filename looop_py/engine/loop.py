"""LoopEngine: a spec bound to the live pieces a round needs, and a driver for its rounds.

The round itself is steps.advance; the engine only supplies the dependencies,
saves each new state (through a RoundStore when given one) and decides how
long to keep stepping:

    settle()    step until the round must wait (the pulse: never blocks)
    drive()     step until it is done, sleeping while workers run (`looop run`)
    run_once()  start a round and drive it; returns the RoundReport, never raises

By default it waits for a human no longer than it takes to ask: run_once
returns the escalated report and the round stays live, awaiting the answer.
Likewise a round whose target another round holds is left waiting for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from looop_py.engine.actions import ApprovalOnlyExecutor
from looop_py.engine.inproc import InMemoryClaims, InMemoryEscalations, NullMemory, SharedWorkspace
from looop_py.engine.levels import gate_for_allowlist
from looop_py.engine.report import RoundOutcome, RoundReport
from looop_py.engine.rounds import Phase, RoundState, new_round, round_id_for
from looop_py.engine.spec import LoopSpec
from looop_py.engine.steps import RoundDeps, advance

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from looop_py.engine.protocols import (
        ActionExecutor,
        Claims,
        Escalations,
        HumanGate,
        Memory,
        RoundStore,
        WorkerRunner,
        Workspaces,
    )

DEFAULT_POLL_S = 0.2
_MAX_STEPS_WITHOUT_WAIT = 1000  # a round has ~15 phases; more means a bug, not progress


class LoopEngine:
    """Defaults are the conservative ones: the gate the spec's `allow:` implies
    (AlwaysEscalate when it allows nothing), an executor that performs nothing,
    no memory, claims and approvals held in this process, and the current
    directory as the workspace. Pass looop's real pieces to run in a work dir.
    """

    def __init__(
        self,
        spec: LoopSpec,
        workers: WorkerRunner,
        *,
        gate: HumanGate | None = None,
        executor: ActionExecutor | None = None,
        memory: Memory | None = None,
        claims: Claims | None = None,
        escalations: Escalations | None = None,
        workspaces: Workspaces | None = None,
        store: RoundStore | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        self._spec = spec
        self.workers = workers
        self.gate: HumanGate = gate if gate is not None else gate_for_allowlist(spec.allow)
        self.executor: ActionExecutor = executor if executor is not None else ApprovalOnlyExecutor()
        self.memory: Memory = memory if memory is not None else NullMemory()
        self.claims: Claims = claims if claims is not None else InMemoryClaims()
        self.escalations: Escalations = (
            escalations if escalations is not None else InMemoryEscalations()
        )
        self.workspaces: Workspaces = workspaces if workspaces is not None else SharedWorkspace()
        self.store = store
        self.clock = clock
        self.sleep = sleep
        self.poll_s = poll_s
        self._rounds: dict[str, RoundState] = {}  # this engine's rounds, when there is no store

    # -- builders (each returns the engine) ------------------------------------------

    def with_gate(self, gate: HumanGate) -> LoopEngine:
        self.gate = gate
        return self

    def with_action_executor(self, executor: ActionExecutor) -> LoopEngine:
        self.executor = executor
        return self

    def with_memory(self, memory: Memory) -> LoopEngine:
        self.memory = memory
        return self

    def with_claims(self, claims: Claims) -> LoopEngine:
        self.claims = claims
        return self

    def with_escalations(self, escalations: Escalations) -> LoopEngine:
        self.escalations = escalations
        return self

    def with_workspaces(self, workspaces: Workspaces) -> LoopEngine:
        self.workspaces = workspaces
        return self

    def with_store(self, store: RoundStore) -> LoopEngine:
        self.store = store
        return self

    @property
    def spec(self) -> LoopSpec:
        return self._spec

    @property
    def deps(self) -> RoundDeps:
        return RoundDeps(
            workers=self.workers,
            claims=self.claims,
            escalations=self.escalations,
            memory=self.memory,
            workspaces=self.workspaces,
            gate=self.gate,
            executor=self.executor,
            persist=self.save,
        )

    # -- rounds ------------------------------------------------------------------------

    def save(self, state: RoundState) -> None:
        if self.store is not None:
            self.store.save(state)
        self._rounds[state.id] = state

    def load(self, round_id: str) -> RoundState:
        if self.store is not None:
            return self.store.load(round_id)
        return self._rounds[round_id]

    def live_rounds(self) -> list[RoundState]:
        if self.store is not None:
            return self.store.live(self._spec.name)
        return [r for r in self._rounds.values() if r.live]

    def start_round(self, *, trigger: str = "manual", now: float | None = None) -> RoundState:
        """Create and save a new round in its first phase; nothing runs yet."""
        now = self.clock() if now is None else now
        if self.store is not None:
            rid = self.store.new_id(self._spec.name, now)
        else:
            base = rid = round_id_for(self._spec.name, now)
            n = 1
            while rid in self._rounds:
                n += 1
                rid = f"{base}-{n}"
        state = new_round(self._spec, now, round_id=rid, trigger=trigger)
        self.save(state)
        return state

    def step(self, state: RoundState, now: float | None = None) -> RoundState:
        """One advance; the new state is saved when it differs."""
        new = advance(state, self.deps, self.clock() if now is None else now)
        if new is not state:
            self.save(new)
        return new

    def settle(self, state: RoundState, now: float | None = None) -> RoundState:
        """Step until the round has to wait for something (or is done). Never sleeps."""
        for _ in range(_MAX_STEPS_WITHOUT_WAIT):
            new = self.step(state, now)
            if new is state:
                return state
            state = new
        raise RuntimeError(f"round {state.id} keeps changing without finishing")  # a bug

    def drive(
        self, state: RoundState, *, wait_for_human: bool = False, wait_for_claim: bool = False
    ) -> RoundState:
        """Step to the end, sleeping `poll_s` while its workers run.

        Returns early, with the round still live, when it has to wait for a
        human's answer or for a target another round holds (either can take
        days), unless told to wait for them; a later settle() goes on from there.
        """
        while True:
            state = self.settle(state)
            if state.phase is Phase.DONE:
                return state
            if state.phase is Phase.AWAITING_APPROVAL and not wait_for_human:
                return state
            if state.phase is Phase.CLAIM and not wait_for_claim:
                return state
            self.sleep(self.poll_s)

    def run_once(
        self,
        *,
        wait_for_human: bool = False,
        wait_for_claim: bool = False,
        trigger: str = "manual",
    ) -> RoundReport:
        """Run one round and return its report. Never raises: failures are the outcome."""
        try:
            state = self.start_round(trigger=trigger)
        except Exception as exc:
            return self.failed_report(f"could not start a round: {exc}")
        return self._drive_safely(state, wait_for_human, wait_for_claim)

    def resume(
        self, round_id: str, *, wait_for_human: bool = False, wait_for_claim: bool = False
    ) -> RoundReport:
        """Drive a saved round on from where it stopped (after a restart, or an answer)."""
        try:
            state = self.load(round_id)
        except Exception as exc:
            return self.failed_report(f"could not load round {round_id}: {exc}")
        return self._drive_safely(state, wait_for_human, wait_for_claim)

    def _drive_safely(
        self, state: RoundState, wait_for_human: bool, wait_for_claim: bool
    ) -> RoundReport:
        try:
            state = self.drive(state, wait_for_human=wait_for_human, wait_for_claim=wait_for_claim)
        except Exception as exc:
            return replace(
                state.report(), outcome=RoundOutcome.FAILED, error=f"the round broke: {exc}"
            )
        return state.report()

    def failed_report(self, error: str) -> RoundReport:
        return RoundReport(
            loop_name=self._spec.name,
            intent=self._spec.intent,
            level=self._spec.level,
            outcome=RoundOutcome.FAILED,
            error=error,
        )
