"""The interfaces a round needs from the rest of looop, kept small on purpose.

The engine is built against these, not against looop's workers, claims or
mailbox, so it can be tested with the in-process versions in inproc.py and
wired to the real ones without changing a line here. Every method must return
promptly: a round is advanced from the pulse, which may never block.

The engine's own modules import this one only for type checking (it needs
`typing`, which the quiet pulse path does not load).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from looop_py.engine.actions import ActionReceipt
from looop_py.engine.levels import GateDecision, LoopLevel, ProposedAction
from looop_py.engine.ports import Answer, ApprovalRequest, MemoryEntry, WorkerRequest, WorkerResult
from looop_py.engine.report import RoundReport
from looop_py.engine.rounds import RoundState
from looop_py.engine.spec import LoopSpec


@runtime_checkable
class HumanGate(Protocol):
    """Proceed alone, or escalate to a human. Called once per round that reaches the gate."""

    def decide(self, level: LoopLevel, action: ProposedAction) -> GateDecision: ...


@runtime_checkable
class ActionExecutor(Protocol):
    """Carries out an approved action in the round's workspace; raises ActionError on failure."""

    def execute(
        self, spec: LoopSpec, action: ProposedAction, workspace: str | None
    ) -> ActionReceipt: ...


@runtime_checkable
class WorkerRunner(Protocol):
    """Starts maker and checker workers and reports how they ended, without waiting."""

    def start(self, request: WorkerRequest) -> str:
        """Start (or find, if `request.id` was started before) a worker; return its handle."""
        ...

    def poll(self, handle: str) -> WorkerResult | None:
        """None while it runs; its result once it has ended.

        A handle the runner does not know is a `failed` result, never None:
        None would leave the round waiting for a worker that does not exist.
        """
        ...

    def cancel(self, handle: str) -> None:
        """Stop it (the round ran out of wall time). Idempotent."""
        ...


@runtime_checkable
class Claims(Protocol):
    """Leases on shared targets, so two rounds never work on one target at once."""

    def acquire(self, name: str, owner: str) -> int | None:
        """The fencing epoch, or None while another owner holds it.

        Re-entrant: the owner that holds it gets its epoch back.
        """
        ...

    def release(self, name: str, owner: str) -> None:
        """Drop it if `owner` holds it; otherwise do nothing."""
        ...


@runtime_checkable
class Escalations(Protocol):
    """The human mailbox, for approvals."""

    def open(self, request: ApprovalRequest) -> str:
        """Put the ask to a human; the same `request.key` twice is one ask. Returns its id."""
        ...

    def poll(self, ask_id: str) -> Answer:
        """The answer so far: pending, approved or denied (with the person's note)."""
        ...


@runtime_checkable
class Memory(Protocol):
    """Each loop's state spine: what earlier rounds found and how they ended."""

    def recall(self, loop: str, k: int) -> list[MemoryEntry]:
        """The latest `k` unexpired entries, oldest first. looop's memories also take
        `tag=` (only entries carrying it) and `loop=None` with a tag (every loop's)."""
        ...

    def record(self, loop: str, entry: MemoryEntry) -> None:
        """Append one; recording the same round's entry twice keeps one; entries past
        their `expires` may be pruned then."""
        ...


@runtime_checkable
class Workspaces(Protocol):
    """Where a round's maker and checker work (a shared dir, a git worktree …)."""

    def prepare(self, round_id: str, spec: LoopSpec) -> str:
        """The workspace path for this round; idempotent per round id."""
        ...

    def release(self, round_id: str, workspace: str, outcome: str) -> None:
        """The round is over; tear down or keep, as the implementation sees fit."""
        ...


@runtime_checkable
class LoopSink(Protocol):
    """Where the scheduler delivers reports worth a human's attention."""

    def deliver(self, report: RoundReport) -> None: ...


@runtime_checkable
class RoundStore(Protocol):
    """Where rounds are saved between steps, so a restart resumes them."""

    def save(self, state: RoundState) -> None: ...

    def load(self, round_id: str) -> RoundState:
        """The saved round; raises LooopError when there is none or it cannot be read."""
        ...

    def live(self, loop: str | None = None) -> list[RoundState]:
        """Rounds not yet done (of one loop, or all), oldest first."""
        ...

    def new_id(self, loop: str, now: float) -> str:
        """An id no saved round has."""
        ...
