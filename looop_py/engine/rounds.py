"""One round of a loop: a state machine persisted in rounds/<id>.json, one step at a time.

    recall     the last 5 entries of memory/<loop>.jsonl
    claim      the target (or the loop's own claim): two rounds never share one
    workspace  where maker and checker work
    maker      start the maker worker, then poll it until it ends → budget check
    checker    start the checker on the same workspace, poll it → budget check
    gate       judge the proposal; then either
      act        run the action executor                                  (proceeded)
      escalate   open an approval ask, wait for the human's answer
                 approved → act; denied → the refusal goes into memory    (escalated)
    record     one entry in memory/<loop>.jsonl, whatever the outcome
    release    drop the claim and the workspace → done

`advance(state, deps, now)` takes exactly one step and returns the new state
(the same object when there is nothing to do yet: a worker still running, a
claim held elsewhere, no answer yet). It never blocks and needs no LLM call, so
the pulse can advance every live round on every beat. It never raises either:
whatever goes wrong becomes the round's `failed` outcome, and the round still
records and releases.

What no gate can override: L1 never acts; below L3 every action waits for a
human; unverified work (the checker did not end `done`) never proceeds alone.
"""

from __future__ import annotations

import contextlib
import enum
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from looop_py import jsonio
from looop_py.engine import prompts
from looop_py.engine.actions import ActionReceipt
from looop_py.engine.budget import BudgetLimit, BudgetState
from looop_py.engine.levels import GateDecision, LoopLevel, ProposedAction
from looop_py.engine.ports import (
    Approval,
    ApprovalRequest,
    MemoryEntry,
    WorkerRequest,
    WorkerResult,
    WorkerStatus,
)
from looop_py.engine.report import RoundOutcome, RoundReport
from looop_py.engine.spec import LoopSpec
from looop_py.errors import CorruptFile, UsageError
from looop_py.ids import check_segment, is_safe_segment

# typing is not imported at run time: the pulse advances rounds every beat.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.engine.protocols import (
        ActionExecutor,
        Claims,
        Escalations,
        HumanGate,
        Memory,
        WorkerRunner,
        Workspaces,
    )

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
_WALL_PHASES = frozenset(
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
WAITING_PHASES = frozenset(
    {Phase.CLAIM, Phase.MAKER_RUNNING, Phase.CHECKER_RUNNING, Phase.AWAITING_APPROVAL}
)


@dataclass(frozen=True)
class RoundDeps:
    """The live pieces a round is advanced with (none of them is persisted)."""

    workers: WorkerRunner
    claims: Claims
    escalations: Escalations
    memory: Memory
    workspaces: Workspaces
    gate: HumanGate
    executor: ActionExecutor
    # Saves a state before the executor runs, so a crash mid-action is seen, never repeated.
    persist: Callable[[RoundState], None] | None = None


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


# -- the machine ---------------------------------------------------------------


def advance(state: RoundState, deps: RoundDeps, now: float) -> RoundState:
    """Take one step. Returns `state` itself when there is nothing to do yet."""
    if state.phase is Phase.DONE:
        return state
    try:
        if state.phase in _WALL_PHASES and _wall_overrun(state, now):
            return _stop_for_wall(state, deps, now)
        new = _STEPS[state.phase](state, deps, now)
    except Exception as exc:  # a misbehaving dependency must not wedge the round
        new = _unexpected(state, deps, now, exc)
    if new is state:
        return state
    return replace(new, updated_at=now, steps=state.steps + 1)


def _step_recall(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    try:
        entries = deps.memory.recall(s.loop, RECALL_K)
    except Exception as exc:
        return replace(s, phase=Phase.CLAIM, warnings=(*s.warnings, f"recall failed: {exc}"))
    prior = tuple(e.content for e in entries[-RECALL_K:] if e.content.strip())
    return replace(s, phase=Phase.CLAIM, prior=prior)


def _step_claim(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    epoch = deps.claims.acquire(s.claim_name, s.id)
    if epoch is None:
        # Held by another round or worker: wait, across beats, until it is free.
        return s if s.waiting_since is not None else replace(s, waiting_since=now)
    return replace(s, phase=Phase.WORKSPACE, claim_epoch=epoch, waiting_since=None)


def _step_workspace(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    try:
        workspace = deps.workspaces.prepare(s.id, s.spec)
    except Exception as exc:
        return _finish(s, RoundOutcome.FAILED, error=f"workspace failed: {exc}")
    return replace(s, phase=Phase.MAKER, workspace=str(workspace))


def _request(s: RoundState, kind: str, prompt: str) -> WorkerRequest:
    return WorkerRequest(
        id=f"{s.id}.{kind}",
        name=f"{s.loop}:{kind}",
        kind=kind,
        loop=s.loop,
        round_id=s.id,
        prompt=prompt,
        read_only=not s.level.maker_may_write,
        workspace=s.workspace,
        runtime=s.spec.runtime,
        max_iters=s.spec.budget.max_iters_per_round,
    )


def _step_maker(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    request = _request(s, "maker", prompts.maker_prompt(s.spec, s.prior))
    try:
        handle = deps.workers.start(request)
    except Exception as exc:
        return _finish(s, RoundOutcome.FAILED, error=f"maker failed to start: {exc}")
    return replace(s, phase=Phase.MAKER_RUNNING, maker_handle=str(handle))


def _step_maker_running(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    assert s.maker_handle is not None
    result = deps.workers.poll(s.maker_handle)
    if result is None:
        return s
    s = _spend(replace(s, maker=result), result)
    if result.status is WorkerStatus.FAILED:
        return _finish(s, RoundOutcome.FAILED, error=f"maker failed: {_said(result)}")
    over = _over_budget(s, "checker skipped")
    return over or replace(s, phase=Phase.CHECKER)


def _step_checker(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    maker_text = s.maker.text if s.maker else None
    request = _request(s, "checker", prompts.checker_prompt(s.spec, maker_text))
    try:
        handle = deps.workers.start(request)
    except Exception as exc:
        return _finish(s, RoundOutcome.FAILED, error=f"checker failed to start: {exc}")
    return replace(s, phase=Phase.CHECKER_RUNNING, checker_handle=str(handle))


def _step_checker_running(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    assert s.checker_handle is not None
    result = deps.workers.poll(s.checker_handle)
    if result is None:
        return s
    s = _spend(replace(s, checker=result), result)
    if result.status is WorkerStatus.FAILED:
        return _finish(s, RoundOutcome.FAILED, error=f"checker failed: {_said(result)}")
    over = _over_budget(s, "gate skipped")
    return over or replace(s, phase=Phase.GATE)


def _step_gate(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    verified = s.checker is not None and s.checker.status is WorkerStatus.DONE
    summary = next(
        (r.text.strip() for r in (s.checker, s.maker) if r is not None and r.has_text and r.text),
        s.spec.intent,
    )
    proposed = ProposedAction(s.spec.action_kind, summary, verified)
    try:
        decision = deps.gate.decide(s.level, proposed)
        if not isinstance(decision, GateDecision):
            raise TypeError(f"the gate returned {decision!r}, not a GateDecision")
    except Exception as exc:
        return _finish(
            replace(s, proposed=proposed), RoundOutcome.FAILED, error=f"gate failed: {exc}"
        )
    s = replace(s, proposed=proposed, decision=decision)
    if s.level is LoopLevel.L1_REPORT:
        return _finish(s, RoundOutcome.REPORTED)  # L1 never acts, whatever the gate said
    reason = decision.reason or "the gate escalated without a reason"
    if decision.auto:
        if s.level is not LoopLevel.L3_UNATTENDED:
            reason = f"the gate said proceed, but at {s.level.label} a human approves every action"
        elif not verified:
            status = s.checker.status.value if s.checker else "none"
            reason = f"the gate said proceed, but the checker did not verify the work ({status})"
        else:
            return replace(s, phase=Phase.ACT)
    return replace(s, phase=Phase.ESCALATE, outcome=RoundOutcome.ESCALATED, reason=reason)


def _step_escalate(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    assert s.proposed is not None
    p = s.proposed
    question = (
        f"Loop `{s.loop}` ({s.level.label}) proposes `{p.kind}`"
        f"{'' if p.verified else ' (NOT verified by its checker)'}.\n"
        f"Why a human is asked: {s.reason}\n\n{p.summary}\n\nApprove?"
    )
    request = ApprovalRequest(
        key=f"{s.id}.approve",
        loop=s.loop,
        round_id=s.id,
        level=s.level.label,
        kind=p.kind,
        summary=p.summary,
        verified=p.verified,
        reason=s.reason or "",
        question=question,
    )
    try:
        ask_id = deps.escalations.open(request)
    except Exception as exc:
        return _finish(s, RoundOutcome.FAILED, error=f"could not ask a human: {exc}")
    return replace(s, phase=Phase.AWAITING_APPROVAL, ask_id=str(ask_id))


def _step_awaiting(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    assert s.ask_id is not None
    answer = deps.escalations.poll(s.ask_id)
    if answer.state is Approval.PENDING:
        return s
    s = replace(s, answer=answer.state.value, answer_note=answer.note)
    if answer.state is Approval.APPROVED:
        return replace(s, phase=Phase.ACT)
    return replace(s, phase=Phase.RECORD, ended_at=now)  # denied: stays escalated


def _step_act(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    assert s.proposed is not None
    acting = replace(s, phase=Phase.ACTING, updated_at=now)
    if deps.persist is not None:
        deps.persist(acting)  # write-ahead: after this, a crash is reported, not retried
    try:
        receipt = deps.executor.execute(s.spec, s.proposed, s.workspace)
    except Exception as exc:
        return _finish(acting, RoundOutcome.FAILED, error=f"action executor failed: {exc}")
    return _finish(replace(acting, action=receipt), RoundOutcome.PROCEEDED)


def _step_acting(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    kind = s.proposed.kind if s.proposed else "?"
    return _finish(
        s,
        RoundOutcome.FAILED,
        error=(
            f"interrupted while the action executor ran `{kind}`; it was not repeated: "
            "check by hand whether it happened"
        ),
    )


def _step_record(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    entry = memory_entry(s, now)
    try:
        deps.memory.record(s.loop, entry)
    except Exception as exc:
        return replace(s, phase=Phase.RELEASE, warnings=(*s.warnings, f"record failed: {exc}"))
    return replace(s, phase=Phase.RELEASE)


def _step_release(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    warnings = list(s.warnings)
    if s.claim_epoch is not None:
        try:
            deps.claims.release(s.claim_name, s.id)
        except Exception as exc:
            warnings.append(f"claim release failed: {exc}")
    if s.workspace is not None:
        try:
            deps.workspaces.release(s.id, s.workspace, s.outcome.value if s.outcome else "failed")
        except Exception as exc:
            warnings.append(f"workspace release failed: {exc}")
    return replace(s, phase=Phase.DONE, ended_at=s.ended_at or now, warnings=tuple(warnings))


def _step_done(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    return s


_STEPS: dict[Phase, Callable[[RoundState, RoundDeps, float], RoundState]] = {
    Phase.RECALL: _step_recall,
    Phase.CLAIM: _step_claim,
    Phase.WORKSPACE: _step_workspace,
    Phase.MAKER: _step_maker,
    Phase.MAKER_RUNNING: _step_maker_running,
    Phase.CHECKER: _step_checker,
    Phase.CHECKER_RUNNING: _step_checker_running,
    Phase.GATE: _step_gate,
    Phase.ESCALATE: _step_escalate,
    Phase.AWAITING_APPROVAL: _step_awaiting,
    Phase.ACT: _step_act,
    Phase.ACTING: _step_acting,
    Phase.RECORD: _step_record,
    Phase.RELEASE: _step_release,
    Phase.DONE: _step_done,
}


# -- helpers ---------------------------------------------------------------------


def _finish(s: RoundState, outcome: RoundOutcome, **fields: Any) -> RoundState:
    """Settle the outcome and go on to record and release."""
    return replace(s, phase=Phase.RECORD, outcome=outcome, **fields)


def _spend(s: RoundState, result: WorkerResult) -> RoundState:
    return replace(
        s,
        input_tokens=s.input_tokens + max(0, result.input_tokens),
        output_tokens=s.output_tokens + max(0, result.output_tokens),
    )


def _tally(s: RoundState) -> BudgetState:
    return BudgetState(s.spec.budget, s.input_tokens, s.output_tokens)


def _over_budget(s: RoundState, skipped: str) -> RoundState | None:
    tally = _tally(s)
    limit = tally.exceeded()
    if limit is None:
        return None
    return _finish(
        s,
        RoundOutcome.BUDGET_EXHAUSTED,
        limit=limit,
        budget_detail=f"{tally.describe(limit)}; {skipped}",
    )


def _wall_overrun(s: RoundState, now: float) -> bool:
    return _tally(s).wall_exceeded(now - s.started_at)


def _stop_for_wall(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    warnings = list(s.warnings)
    handle = {Phase.MAKER_RUNNING: s.maker_handle, Phase.CHECKER_RUNNING: s.checker_handle}.get(
        s.phase
    )
    if handle is not None:
        try:
            deps.workers.cancel(handle)
        except Exception as exc:
            warnings.append(f"could not stop the worker {handle}: {exc}")
    where = s.phase.value.removesuffix("-running")
    detail = _tally(s).describe(BudgetLimit.WALL, now - s.started_at)
    return _finish(
        s,
        RoundOutcome.BUDGET_EXHAUSTED,
        limit=BudgetLimit.WALL,
        budget_detail=f"{detail}; stopped during {where}",
        warnings=tuple(warnings),
    )


def _unexpected(s: RoundState, deps: RoundDeps, now: float, exc: Exception) -> RoundState:
    message = f"{type(exc).__name__}: {exc}"
    if s.phase is Phase.RECORD:
        return replace(s, phase=Phase.RELEASE, warnings=(*s.warnings, f"record: {message}"))
    if s.phase is Phase.RELEASE:
        return replace(s, phase=Phase.DONE, ended_at=now, warnings=(*s.warnings, message))
    handle = {Phase.MAKER_RUNNING: s.maker_handle, Phase.CHECKER_RUNNING: s.checker_handle}.get(
        s.phase
    )
    if handle is not None:
        with contextlib.suppress(Exception):
            deps.workers.cancel(handle)
    if s.phase is Phase.AWAITING_APPROVAL:
        # The mailbox is unreadable right now; try again next beat rather than fail.
        return s if message in s.warnings else replace(s, warnings=(*s.warnings, message))
    return _finish(s, RoundOutcome.FAILED, error=f"{s.phase.value} step failed: {message}")


def _said(result: WorkerResult) -> str:
    if result.has_text and result.text:
        return _cap(result.text.strip(), 300)
    return "it reported no reason"


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def memory_entry(s: RoundState, now: float) -> MemoryEntry:
    """`<outcome> — <what happened>`: the line the next round reads about this one."""
    label = s.outcome.value if s.outcome else "failed"
    text = next(
        (r.text.strip() for r in (s.checker, s.maker) if r is not None and r.has_text and r.text),
        s.spec.intent,
    )
    if s.answer == "denied":
        note = f": {s.answer_note}" if s.answer_note else ""
        body = f"a human denied `{s.spec.action_kind}`{note}. The proposal was: {text}"
    elif s.outcome is RoundOutcome.FAILED:
        body = f"{s.error}. {text}" if s.maker else str(s.error)
    elif s.outcome is RoundOutcome.BUDGET_EXHAUSTED:
        body = f"{s.budget_detail}. {text}"
    elif s.outcome is RoundOutcome.PROCEEDED and s.action is not None:
        by = "after a human approved" if s.answer == "approved" else "on its own"
        body = f"`{s.action.kind}` ran {by}: {s.action.summary}. {text}"
    else:
        body = text
    return MemoryEntry(
        content=_cap(f"{label} — {body}", MEMORY_TEXT_CAP),
        tags=(s.loop, "loop-state"),
        source=f"loop:{s.loop}",
        created=now,
        round_id=s.id,
        outcome=label,
    )


# -- storage ---------------------------------------------------------------------


@dataclass(frozen=True)
class RoundStore:
    """rounds/<id>.json, each written atomically."""

    directory: Path

    def path(self, round_id: str) -> Path:
        return self.directory / f"{check_segment(round_id, 'round id')}.json"

    def save(self, state: RoundState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        jsonio.write_json(self.path(state.id), state.to_dict())

    def load(self, round_id: str) -> RoundState:
        data = jsonio.read_json(self.path(round_id))
        if data is None:
            raise UsageError(f"no round {round_id!r}", "list rounds with `looop rounds --all`")
        try:
            return RoundState.from_dict(data)
        except (AttributeError, KeyError, TypeError, ValueError, UsageError) as exc:
            raise CorruptFile(
                f"{self.path(round_id)} is not a round this looop can read ({exc})",
                "move it aside; the loop will start a fresh round",
            ) from None

    def new_id(self, loop: str, now: float) -> str:
        base = round_id_for(loop, now)
        rid, n = base, 1
        while self.path(rid).exists():
            n += 1
            rid = f"{base}-{n}"
        return rid

    def all(self) -> list[RoundState]:
        """Every readable round, oldest first; unreadable files are skipped."""
        found: list[RoundState] = []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        for name in names:
            stem = name.removesuffix(".json")
            if stem == name or not is_safe_segment(stem):
                continue
            try:
                found.append(self.load(stem))
            except (UsageError, CorruptFile, OSError):
                continue
        found.sort(key=lambda r: (r.started_at, r.id))
        return found

    def live(self, loop: str | None = None) -> list[RoundState]:
        return [r for r in self.all() if r.live and (loop is None or r.loop == loop)]
