"""A round of a loop as data: its phases and its state, saved after every step.

    recall     the last 5 unexpired entries of the loop's memory
    claim      the target (or the loop's own claim): two rounds never share one
    workspace  where maker and checker work
    maker      start the maker worker, then poll it until it ends → budget check
    checker    start the checker on the same workspace, poll it → budget check
    gate       judge the proposal; then either
      act        run the action executor                                  (proceeded)
      escalate   open an approval ask, wait for the human's answer
                 approved → act; denied → the refusal goes into memory    (escalated)
    record     one entry in the loop's memory, whatever the outcome
    release    drop the claim and the workspace → done

steps.py moves a RoundState from one phase to the next; where it is saved is
the caller's business (looop_py/loops/store.py keeps rounds/<id>.json).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from looop_py.engine.actions import ActionReceipt
from looop_py.engine.budget import BudgetLimit
from looop_py.engine.levels import GateDecision, LoopLevel, ProposedAction
from looop_py.engine.ports import WorkerResult
from looop_py.engine.report import RoundOutcome, RoundReport
from looop_py.engine.spec import LoopSpec
from looop_py.ids import check_segment

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


RECALL_K = 5
MEMORY_TEXT_CAP = 1000  # characters of a round's text kept in its memory entry
FORMAT_VERSION = 1


class Phase(enum.Enum):
    RECALL = "recall"
    CLAIM = "claim"
    WORKSPACE = "workspace"
    MAKER = "maker"
    MAKER_RUNNING = "maker-running"
    CHECKER = "checker"
    CHECKER_RUNNING = "checker-running"
    GATE = "gate"
    ESCALATE = "escalate"
    AWAITING_APPROVAL = "awaiting-approval"
    ACT = "act"
    ACTING = "acting"  # write-ahead mark: the executor may have run
    RECORD = "record"
    RELEASE = "release"
    DONE = "done"


# The wall-clock ceiling covers the round's own work; a human's time to answer does not count.
WALL_PHASES = frozenset(
    {
        Phase.RECALL,
        Phase.CLAIM,
        Phase.WORKSPACE,
        Phase.MAKER,
        Phase.MAKER_RUNNING,
        Phase.CHECKER,
        Phase.CHECKER_RUNNING,
    }
)


@dataclass(frozen=True)
class RoundState:
    id: str
    spec: LoopSpec  # as it was when the round began; later goal edits do not reach it
    phase: Phase
    started_at: float
    updated_at: float
    trigger: str = "manual"  # manual | cadence | move | sensor
    ended_at: float | None = None
    prior: tuple[str, ...] = ()
    claim_epoch: int | None = None
    waiting_since: float | None = None  # for the claim
    workspace: str | None = None
    maker_handle: str | None = None
    checker_handle: str | None = None
    maker: WorkerResult | None = None
    checker: WorkerResult | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    unsplit_tokens: int = 0  # reported only as a total: they count toward max_total_tokens
    proposed: ProposedAction | None = None
    decision: GateDecision | None = None
    outcome: RoundOutcome | None = None
    reason: str | None = None
    limit: BudgetLimit | None = None
    budget_detail: str | None = None
    error: str | None = None
    ask_id: str | None = None
    answer: str | None = None
    answer_note: str | None = None
    action: ActionReceipt | None = None
    warnings: tuple[str, ...] = ()
    steps: int = 0

    @property
    def loop(self) -> str:
        return self.spec.name

    @property
    def level(self) -> LoopLevel:
        return self.spec.level

    @property
    def live(self) -> bool:
        return self.phase is not Phase.DONE

    @property
    def claim_name(self) -> str:
        return self.spec.claim_name

    def report(self) -> RoundReport:
        return RoundReport(
            loop_name=self.spec.name,
            intent=self.spec.intent,
            level=self.spec.level,
            outcome=self.outcome,
            maker=self.maker,
            checker=self.checker,
            decision=self.decision,
            proposed=self.proposed,
            action=self.action,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            unsplit_tokens=self.unsplit_tokens,
            reason=self.reason,
            limit=self.limit,
            budget_detail=self.budget_detail,
            error=self.error,
            round_id=self.id,
            phase=self.phase.value,
            claim=self.claim_name,
            ask_id=self.ask_id,
            answer=self.answer,
            answer_note=self.answer_note,
            started_at=self.started_at,
            ended_at=self.ended_at,
        )

    # -- persistence -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": FORMAT_VERSION,
            "id": self.id,
            "loop": self.spec.name,
            "phase": self.phase.value,
            "trigger": self.trigger,
            "started_at": self.started_at,
            "updated_at": self.updated_at,
            "ended_at": self.ended_at,
            "spec": self.spec.to_dict(),
            "prior": list(self.prior),
            "claim": {"name": self.claim_name, "epoch": self.claim_epoch},
            "waiting_since": self.waiting_since,
            "workspace": self.workspace,
            "maker_handle": self.maker_handle,
            "checker_handle": self.checker_handle,
            "maker": self.maker.to_dict() if self.maker else None,
            "checker": self.checker.to_dict() if self.checker else None,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "unsplit_tokens": self.unsplit_tokens,
            "proposed": self.proposed.to_dict() if self.proposed else None,
            "decision": self.decision.to_dict() if self.decision else None,
            "outcome": self.outcome.value if self.outcome else None,
            "reason": self.reason,
            "limit": self.limit.value if self.limit else None,
            "budget_detail": self.budget_detail,
            "error": self.error,
            "ask": self.ask_id,
            "answer": self.answer,
            "answer_note": self.answer_note,
            "action": self.action.to_dict() if self.action else None,
            "warnings": list(self.warnings),
            "steps": self.steps,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundState:
        def opt(key: str, build: Callable[[Any], Any]) -> Any:
            value = data.get(key)
            return None if value is None else build(value)

        claim = data.get("claim") or {}
        return cls(
            id=str(data["id"]),
            spec=LoopSpec.from_dict(data["spec"]),
            phase=Phase(data["phase"]),
            started_at=float(data["started_at"]),
            updated_at=float(data.get("updated_at") or data["started_at"]),
            trigger=str(data.get("trigger") or "manual"),
            ended_at=opt("ended_at", float),
            prior=tuple(str(p) for p in data.get("prior") or ()),
            claim_epoch=_opt_int(claim.get("epoch")),
            waiting_since=opt("waiting_since", float),
            workspace=opt("workspace", str),
            maker_handle=opt("maker_handle", str),
            checker_handle=opt("checker_handle", str),
            maker=opt("maker", WorkerResult.from_dict),
            checker=opt("checker", WorkerResult.from_dict),
            input_tokens=int(data.get("input_tokens") or 0),
            output_tokens=int(data.get("output_tokens") or 0),
            unsplit_tokens=int(data.get("unsplit_tokens") or 0),
            proposed=opt("proposed", ProposedAction.from_dict),
            decision=opt("decision", GateDecision.from_dict),
            outcome=opt("outcome", RoundOutcome),
            reason=opt("reason", str),
            limit=opt("limit", BudgetLimit),
            budget_detail=opt("budget_detail", str),
            error=opt("error", str),
            ask_id=opt("ask", str),
            answer=opt("answer", str),
            answer_note=opt("answer_note", str),
            action=opt("action", ActionReceipt.from_dict),
            warnings=tuple(str(w) for w in data.get("warnings") or ()),
            steps=int(data.get("steps") or 0),
        )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def round_id_for(loop: str, now: float) -> str:
    """`<loop>-<UTC yyyymmddThhmmss>`: sortable, readable, a safe path segment."""
    return f"{loop}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}"


def new_round(
    spec: LoopSpec, now: float, *, round_id: str | None = None, trigger: str = "manual"
) -> RoundState:
    rid = check_segment(round_id or round_id_for(spec.name, now), "round id")
    return RoundState(
        id=rid, spec=spec, phase=Phase.RECALL, started_at=now, updated_at=now, trigger=trigger
    )
