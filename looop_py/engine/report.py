"""What a round did: its outcome, and a report a human can read in ten seconds."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from looop_py.engine.actions import ActionReceipt
from looop_py.engine.budget import BudgetLimit
from looop_py.engine.levels import GateDecision, LoopLevel, ProposedAction
from looop_py.engine.ports import WorkerResult, WorkerStatus

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class RoundOutcome(enum.Enum):
    REPORTED = "reported"  # L1: findings delivered, nothing done
    PROCEEDED = "proceeded"  # the action ran (alone at L3, or after a human approved)
    ESCALATED = "escalated"  # handed to a human: waiting for, or refused by, them
    BUDGET_EXHAUSTED = "budget-exhausted"  # a token or wall-clock ceiling stopped it
    BLOCKED = "blocked"  # the maker could not do the work (its provider refused, or it said
    # so): nothing was checked or asked, the reason is the maker's own words
    FAILED = "failed"  # a worker, the gate, the executor or the workspace failed

    @property
    def label(self) -> str:
        return self.value

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RoundReport:
    loop_name: str
    intent: str
    level: LoopLevel
    outcome: RoundOutcome | None  # None while the round has not got that far
    maker: WorkerResult | None = None
    checker: WorkerResult | None = None
    decision: GateDecision | None = None  # what the gate said (set once the gate ran)
    proposed: ProposedAction | None = None
    action: ActionReceipt | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    unsplit_tokens: int = 0  # reported only as a total (`looop done --tokens`)
    reason: str | None = None  # why it escalated
    limit: BudgetLimit | None = None  # which ceiling stopped it
    budget_detail: str | None = None  # "total-tokens: 412 spent, limit 400"
    error: str | None = None  # why it failed
    round_id: str | None = None
    phase: str = "done"
    claim: str | None = None  # the claim name the round takes (or waits for)
    ask_id: str | None = None  # the approval ask, when escalated
    answer: str | None = None  # approved | denied, once a human answered
    answer_note: str | None = None
    started_at: float | None = None
    ended_at: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.unsplit_tokens

    @property
    def finished(self) -> bool:
        return self.phase == "done"

    def should_deliver(self) -> bool:
        """Everything but a clean proceed goes to a human: an L3 success stays quiet."""
        return self.outcome is not RoundOutcome.PROCEEDED

    def render(self) -> str:
        """The crate's lines first, in its format (`maker: Done in 3 iters`), then looop's
        own: the checker's verdict, a wait, an approval, a budget hit or a failure. Every
        line ends in a newline."""
        state = self.outcome.label if self.outcome else f"in progress: {self.phase}"
        lines = [
            f"[{self.level.label}] loop `{self.loop_name}` ({state})",
            f"intent: {self.intent}",
        ]
        if self.maker is not None:
            lines.append(f"maker: {_worker_line(self.maker)}")
            if self.maker.has_text:  # the proposal, as the crate prints it
                assert self.maker.text is not None
                lines.append(self.maker.text.strip())
        if self.checker is not None:
            lines.append(f"checker: {_worker_line(self.checker)}")
        if self.outcome is RoundOutcome.ESCALATED and self.reason:
            lines.append(f"escalation: {self.reason}")
        if self.action is not None:
            lines.append(f"action: {self.action.kind} — {self.action.summary}")
        unsplit = f" / {self.unsplit_tokens} unsplit" if self.unsplit_tokens else ""
        lines.append(f"tokens: {self.input_tokens} in / {self.output_tokens} out{unsplit}")
        # looop's lines, after the crate's
        if self.checker is not None and self.checker.has_text:
            assert self.checker.text is not None
            lines += ["checker said:", self.checker.text.strip()]
        if self.phase == "claim":
            lines.append(f"waiting: claim `{self.claim}` is held by another round or worker")
        if self.ask_id and self.answer is None and self.phase != "done":
            lines.append(f"approval: waiting for a human (looop approve {self.ask_id})")
        elif self.answer:
            note = f": {self.answer_note}" if self.answer_note else ""
            lines.append(f"approval: {self.answer} by a human{note}")
        if self.outcome is RoundOutcome.BUDGET_EXHAUSTED:
            detail = self.budget_detail or (self.limit.label if self.limit else "a limit")
            lines.append(f"budget: {detail}")
        if self.outcome in (RoundOutcome.FAILED, RoundOutcome.BLOCKED) and self.error:
            lines.append(f"failure: {self.error}")
        return "".join(line + "\n" for line in lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round_id,
            "loop": self.loop_name,
            "intent": self.intent,
            "level": self.level.label,
            "phase": self.phase,
            "claim": self.claim,
            "outcome": self.outcome.label if self.outcome else None,
            "reason": self.reason,
            "limit": self.limit.label if self.limit else None,
            "budget_detail": self.budget_detail,
            "error": self.error,
            "maker": self.maker.to_dict() if self.maker else None,
            "checker": self.checker.to_dict() if self.checker else None,
            "decision": self.decision.to_dict() if self.decision else None,
            "proposed": self.proposed.to_dict() if self.proposed else None,
            "action": self.action.to_dict() if self.action else None,
            "ask": self.ask_id,
            "answer": self.answer,
            "answer_note": self.answer_note,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "unsplit_tokens": self.unsplit_tokens,
            "total_tokens": self.total_tokens,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "deliver": self.should_deliver(),
        }


# The crate prints a sub-agent's status with Rust's Debug: Done, DoneWithConcerns, Blocked.
_CRATE_STATUS = {
    WorkerStatus.DONE: "Done",
    WorkerStatus.DONE_WITH_CONCERNS: "DoneWithConcerns",
    WorkerStatus.BLOCKED: "Blocked",
    WorkerStatus.FAILED: "Failed",  # looop's own: the crate folds this into the outcome
}


def _worker_line(result: WorkerResult) -> str:
    """`Done in 3 iters` as the crate writes it; `Done` when no one counted the iterations
    (a shell worker, or a CLI whose stream looop does not count turns in)."""
    status = _CRATE_STATUS[result.status]
    return f"{status} in {result.iters} iters" if result.iters is not None else status
