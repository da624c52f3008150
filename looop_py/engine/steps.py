"""The round state machine: `advance(state, deps, now)` takes exactly one step.

It returns the new state, or the same object when there is nothing to do yet
(a worker still running, a claim held elsewhere, no answer yet). It never
blocks and needs no LLM call, so the pulse can advance every live round on
every beat. It never raises either: whatever goes wrong becomes the round's
`failed` outcome, and the round still records and releases.

What no gate can override: L1 never acts; below L3 every action waits for a
human; unverified work (the checker did not end `done`) never proceeds alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace

from looop_py.engine import prompts
from looop_py.engine.budget import BudgetLimit, BudgetState
from looop_py.engine.levels import GateDecision, LoopLevel, ProposedAction
from looop_py.engine.ports import (
    Approval,
    ApprovalRequest,
    BudgetSpent,
    MemoryEntry,
    WorkerRequest,
    WorkerResult,
    WorkerStatus,
)
from looop_py.engine.report import RoundOutcome
from looop_py.engine.rounds import (
    MEMORY_TEXT_CAP,
    RECALL_K,
    WALL_PHASES,
    Phase,
    RoundState,
)

# typing is not imported at run time: the engine imports as a light library.
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


def advance(state: RoundState, deps: RoundDeps, now: float) -> RoundState:
    """Take one step. Returns `state` itself when there is nothing to do yet."""
    if state.phase is Phase.DONE:
        return state
    try:
        if state.phase in WALL_PHASES and _wall_overrun(state, now):
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
    live = [e for e in entries if not e.is_expired(now)]  # whatever the memory pruned
    prior = tuple(e.content for e in live[-RECALL_K:] if e.content.strip())
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
        runtime=s.spec.runtime_for(kind),
        max_iters=s.spec.budget.max_iters_per_round,
    )


def _step_maker(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    request = _request(s, "maker", prompts.maker_prompt(s.spec, s.prior))
    try:
        handle = deps.workers.start(request)
    except BudgetSpent as exc:
        return _finish(s, RoundOutcome.BUDGET_EXHAUSTED, error=f"maker not started: {exc}")
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
    if result.status is WorkerStatus.BLOCKED:  # e.g. its provider refused: no checker, no ask
        return _finish(s, RoundOutcome.BLOCKED, error=f"maker blocked: {_said(result)}")
    over = _over_budget(s, "checker skipped")
    return over or replace(s, phase=Phase.CHECKER)


def _step_checker(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    maker_text = s.maker.text if s.maker else None
    request = _request(s, "checker", prompts.checker_prompt(s.spec, maker_text))
    try:
        handle = deps.workers.start(request)
    except BudgetSpent as exc:
        return _finish(s, RoundOutcome.BUDGET_EXHAUSTED, error=f"checker not started: {exc}")
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
    second_yes = (
        ""
        if p.verified
        else "Approving unverified work takes a second yes: `looop approve ID --unverified`.\n"
    )
    question = (
        f"Loop `{s.loop}` ({s.level.label}) proposes `{p.kind}`"
        f"{'' if p.verified else ' (NOT verified by its checker)'}.\n{second_yes}"
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
    except Exception as exc:  # as in the crate: a failed round carries no gate decision
        error = f"action executor failed: {exc}"
        return _finish(acting, RoundOutcome.FAILED, error=error, decision=None)
    return _finish(replace(acting, action=receipt), RoundOutcome.PROCEEDED)


def _step_acting(s: RoundState, deps: RoundDeps, now: float) -> RoundState:
    kind = s.proposed.kind if s.proposed else "?"
    return _finish(
        s,
        RoundOutcome.FAILED,
        decision=None,
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
        unsplit_tokens=s.unsplit_tokens + max(0, result.unsplit_tokens),
    )


def _tally(s: RoundState) -> BudgetState:
    return BudgetState(s.spec.budget, s.input_tokens, s.output_tokens, s.unsplit_tokens)


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
        if s.action.ran:
            body = f"`{s.action.kind}` ran {by}: {s.action.summary}. {text}"
        else:
            body = f"`{s.action.kind}` was cleared {by}, but {s.action.summary}. {text}"
    else:
        body = text
    return MemoryEntry(
        content=_cap(f"{label} — {body}", MEMORY_TEXT_CAP),
        tags=(s.loop, "loop-state"),
        source=f"loop:{s.loop}",
        created=now,
        round_id=s.id,
        outcome=label,
        expires=s.spec.memory_expires(now),
    )
