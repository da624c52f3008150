"""Parity with harness-rs-loop-engine 0.0.24: the crate's own tests, by name, with the
values and substrings they assert, for levels, budgets, specs, patterns, the engine's
rounds (reports, receipts, errors, memory) and the cadence grammar (harness-rs-daemon).

A change that breaks parity fails here under the crate's test name. Where looop
differs on purpose the test says so and asserts looop's side; the crate has no tools,
so its tool filter is looop's read-only mode. Reference:
/work/shared/reference/harness-loop-engine.md §6 and the crate's engine.rs tests.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from looop_py import (
    ActionError,
    ActionReceipt,
    AllowlistGate,
    AlwaysEscalate,
    BudgetLimit,
    BudgetState,
    CallbackActionExecutor,
    CallbackGate,
    GateDecision,
    LoopEngine,
    LoopLevel,
    LoopSpec,
    ProposedAction,
    RoundOutcome,
    RoundReport,
    Schedule,
    ScheduleError,
    TokenBudget,
    patterns,
)
from looop_py.engine.inproc import ListMemory, ScriptedWorkers, done
from looop_py.engine.ports import MemoryEntry, WorkerResult, WorkerStatus


def spec(level: LoopLevel) -> LoopSpec:
    """The crate's test spec."""
    return (
        LoopSpec("test-loop", "keep the test loop honest", level)
        .with_maker_prompt("make a report")
        .with_checker_prompt("verify the report")
        .with_action_kind("commit")
    )


def run(level: LoopLevel, workers: ScriptedWorkers, **kw: Any) -> RoundReport:
    return LoopEngine(spec(level), workers, sleep=lambda s: None, **kw).run_once()


def verified(kind: str) -> ProposedAction:
    return ProposedAction(kind, "summary", True)


# -- level.rs ------------------------------------------------------------------------------


def test_l1_is_read_only() -> None:
    assert not LoopLevel.L1_REPORT.maker_may_write
    assert LoopLevel.L2_ASSISTED.maker_may_write and LoopLevel.L3_UNATTENDED.maker_may_write


def test_always_escalate_never_proceeds() -> None:
    decision = AlwaysEscalate().decide(LoopLevel.L3_UNATTENDED, verified("commit"))
    assert not decision.is_auto  # (the crate's reason text is looop's own words here)


def test_allowlist_gate_only_auto_at_l3_for_verified_allowlisted() -> None:
    gate = AllowlistGate(["comment", "commit"])
    l3, l2 = LoopLevel.L3_UNATTENDED, LoopLevel.L2_ASSISTED
    assert gate.decide(l3, verified("commit")).is_auto
    assert not gate.decide(l3, verified("force-push")).is_auto
    assert not gate.decide(l3, ProposedAction("commit", "s", False)).is_auto
    assert not gate.decide(l2, verified("commit")).is_auto


def test_callback_gate_runs_closure() -> None:
    gate = CallbackGate(
        lambda level, action: (
            GateDecision.auto_proceed() if action.kind == "ok" else GateDecision.escalate("no")
        )
    )
    assert gate.decide(LoopLevel.L3_UNATTENDED, verified("ok")).is_auto


# -- budget.rs ------------------------------------------------------------------------------


def test_no_limits_never_exceeds() -> None:
    state = BudgetState(TokenBudget.iters(8))
    state.add(1_000_000, 1_000_000)
    assert state.exceeded() is None
    assert state.max_iters() == 8


def test_total_limit_trips() -> None:
    state = BudgetState(TokenBudget().with_max_total_tokens(100))
    state.add(60, 30)
    assert state.exceeded() is None
    state.add(20, 0)
    assert state.exceeded() is BudgetLimit.TOTAL


def test_input_and_output_limits_trip_independently() -> None:
    both = BudgetState(TokenBudget().with_max_input_tokens(50).with_max_output_tokens(50))
    both.add(51, 1)
    assert both.exceeded() is BudgetLimit.INPUT
    output = BudgetState(TokenBudget().with_max_output_tokens(50))
    output.add(1, 51)
    assert output.exceeded() is BudgetLimit.OUTPUT


# -- spec.rs --------------------------------------------------------------------------------


def test_builder_roundtrips_through_json() -> None:
    s = (
        LoopSpec("issue-triage", "label and route new issues", LoopLevel.L1_REPORT)
        .with_cadence("every 2h")
        .with_action_kind("comment")
    )
    back = LoopSpec.from_json(s.to_json())
    assert (back.name, back.level, back.cadence, back.action_kind) == (
        "issue-triage",
        LoopLevel.L1_REPORT,
        "every 2h",
        "comment",
    )
    assert '"level":"l1-report"' in s.to_json()  # serde's kebab-case


# -- patterns.rs ----------------------------------------------------------------------------


def test_catalogue_has_seven_uniquely_named_loops() -> None:
    names = [p.name for p in patterns.catalogue()]
    assert len(names) == 7 and len(set(names)) == 7


def test_sweepers_are_assisted_everything_else_reports() -> None:
    by_name = {p.name.replace("-", "_"): p for p in patterns.catalogue()}
    assert by_name["ci_sweeper"].level is LoopLevel.L2_ASSISTED
    assert by_name["dependency_sweeper"].level is LoopLevel.L2_ASSISTED
    assert by_name["daily_triage"].level is LoopLevel.L1_REPORT
    assert by_name["issue_triage"].level is LoopLevel.L1_REPORT


def test_every_pattern_cadence_parses() -> None:
    for p in patterns.catalogue():
        Schedule.parse(p.cadence)


# -- engine.rs ------------------------------------------------------------------------------


def test_l1_filters_mutating_tools_before_subagent_context() -> None:
    # looop's workers are agent CLIs, not tool lists: L1 runs both in read-only mode.
    workers = ScriptedWorkers([done("maker report"), done("checker report")])
    report = run(LoopLevel.L1_REPORT, workers)
    assert report.outcome is RoundOutcome.REPORTED
    assert len(workers.requests) == 2
    assert all(r.read_only for r in workers.requests)
    assert "READ-ONLY" in workers.requests[0].prompt
    assert [r.name for r in workers.requests] == ["test-loop:maker", "test-loop:checker"]


def test_l3_allowlisted_verified_round_proceeds_quietly() -> None:
    workers = ScriptedWorkers([done("maker produced patch", 10, 5), done("verified clean", 7, 3)])
    report = run(LoopLevel.L3_UNATTENDED, workers, gate=AllowlistGate(["commit"]))
    assert report.outcome is RoundOutcome.PROCEEDED
    assert report.decision is not None and report.decision.is_auto
    action = report.action
    assert action.kind == "commit"
    assert "no external action executor configured" in action.summary
    assert not report.should_deliver()
    assert report.input_tokens == 17
    assert report.output_tokens == 8


def test_auto_proceed_invokes_custom_action_executor() -> None:
    calls: list[tuple[str, str, str | None]] = []

    def execute(s: LoopSpec, action: ProposedAction, workspace: str | None) -> ActionReceipt:
        calls.append((s.name, action.kind, workspace))
        return ActionReceipt("commit", "created commit abc123")

    workers = ScriptedWorkers([done("maker produced patch"), done("verified clean")])
    report = run(
        LoopLevel.L3_UNATTENDED,
        workers,
        gate=AllowlistGate(["commit"]),
        executor=CallbackActionExecutor(execute),
    )
    assert calls == [("test-loop", "commit", ".")]  # the crate's world.repo.root == "."
    assert report.outcome is RoundOutcome.PROCEEDED
    assert report.action == ActionReceipt("commit", "created commit abc123")
    assert "action: commit" in report.render()


def test_action_executor_failure_fails_round() -> None:
    def boom(s: LoopSpec, action: ProposedAction, workspace: str | None) -> ActionReceipt:
        raise ActionError("boom")

    workers = ScriptedWorkers([done("maker produced patch"), done("verified clean")])
    report = run(
        LoopLevel.L3_UNATTENDED,
        workers,
        gate=AllowlistGate(["commit"]),
        executor=CallbackActionExecutor(boom),
    )
    assert report.outcome is RoundOutcome.FAILED
    error = report.error
    assert "action executor failed" in error and "boom" in error
    assert report.action is None
    assert report.should_deliver()
    assert report.decision is None  # folded: no decision on Failed


def test_budget_exhaustion_after_maker_skips_checker() -> None:
    workers = ScriptedWorkers([done("maker spent too much", 4, 3), done("checker should not run")])
    s = spec(LoopLevel.L2_ASSISTED).with_budget(TokenBudget.iters(4).with_max_total_tokens(5))
    report = LoopEngine(s, workers, sleep=lambda t: None).run_once()
    assert report.outcome is RoundOutcome.BUDGET_EXHAUSTED
    assert report.limit is BudgetLimit.TOTAL
    assert report.maker is not None
    assert report.checker is None
    assert len(workers.requests) == 1  # the model was called once
    assert report.decision is None


def test_memory_state_is_recalled_and_round_is_recorded() -> None:
    memory = ListMemory(
        {"test-loop": [MemoryEntry("prior loop state", ("test-loop", "loop-state"))]}
    )
    workers = ScriptedWorkers([done("maker used prior state"), done("checker verified")])
    report = run(LoopLevel.L1_REPORT, workers, memory=memory)
    assert report.outcome is RoundOutcome.REPORTED
    assert "State from previous rounds:\n- prior loop state" in workers.requests[0].prompt
    entries = memory.entries["test-loop"]
    assert len(entries) == 2
    recorded = entries[-1]
    assert recorded.content.startswith("reported")
    assert recorded.source == "loop:test-loop"
    assert "loop-state" in recorded.tags


# -- reports: RoundReport::render's lines (engine.rs) ----------------------------------------


def test_render_keeps_the_crate_line_format() -> None:
    workers = ScriptedWorkers(
        [
            WorkerResult(WorkerStatus.DONE, "  patch ready  ", 10, 5, iters=3),
            WorkerResult(WorkerStatus.DONE, "verified clean", 7, 3, iters=2),
        ]
    )
    report = run(LoopLevel.L3_UNATTENDED, workers, gate=AllowlistGate(["commit"]))
    crate = (
        "[L3-unattended] loop `test-loop` (proceeded)\n"
        "intent: keep the test loop honest\n"
        "maker: Done in 3 iters\n"
        "patch ready\n"
        "checker: Done in 2 iters\n"
        "action: commit — "
    )
    text = report.render()
    assert text.startswith(crate), text
    assert "\ntokens: 17 in / 8 out\n" in text
    # looop's own lines come after the crate's
    assert text.index("tokens: ") < text.index("checker said:\nverified clean\n")
    assert text.endswith("\n")


def test_render_of_an_escalation_and_an_unfinished_count() -> None:
    workers = ScriptedWorkers(
        [WorkerResult(WorkerStatus.DONE_WITH_CONCERNS, "patch", 1, 1, iters=12), done("ok")]
    )
    report = run(LoopLevel.L2_ASSISTED, workers)
    text = report.render()
    assert "(escalated)\n" in text.splitlines()[0] + "\n"
    assert "\nmaker: DoneWithConcerns in 12 iters\npatch\n" in text
    assert "\nchecker: Done\n" in text  # no count known: the crate's status alone
    assert "\nescalation: " in text


def test_outcome_labels_match_the_crate() -> None:
    labels = {o.label for o in RoundOutcome} - {"blocked"}  # blocked: looop's own
    assert labels == {"reported", "proceeded", "escalated", "budget-exhausted", "failed"}
    assert [lv.label for lv in LoopLevel] == ["L1-report", "L2-assisted", "L3-unattended"]


# -- MemoryEntry (harness-core): id, content, tags, source, created, expires ---------------


def test_memory_entry_has_an_id_and_expires() -> None:
    entry = MemoryEntry("x", ("t",), "loop:a", created=100.0, expires=200.0)
    assert entry.id and entry.id == MemoryEntry.from_dict(entry.to_dict()).id
    assert not entry.is_expired(199.0) and entry.is_expired(200.0)
    assert not MemoryEntry("y").is_expired(1e18)  # no ttl: never


# -- cadence (harness-daemon) ---------------------------------------------------------------


def test_parse_daily() -> None:
    Schedule.parse("daily 08:00")
    Schedule.parse("daily 23:59")
    for bad in ("daily 25:00", "daily noon"):
        with pytest.raises(ScheduleError):
            Schedule.parse(bad)


def test_parse_weekly() -> None:
    Schedule.parse("weekly mon 09:30")
    with pytest.raises(ScheduleError):
        Schedule.parse("weekly funday 09:30")


def test_parse_interval() -> None:
    for ok in ("every 30s", "every 5m", "every 2h", "every 1d"):
        Schedule.parse(ok)
    with pytest.raises(ScheduleError):
        Schedule.parse("every 5min")


def test_daily_next_after() -> None:
    s = Schedule.parse("daily 08:00")
    assert s.next_after(dt.datetime(2026, 5, 16, 9, 0)) == dt.datetime(2026, 5, 17, 8, 0)
    assert s.next_after(dt.datetime(2026, 5, 16, 7, 0)) == dt.datetime(2026, 5, 16, 8, 0)


def test_weekly_next_after() -> None:
    s = Schedule.parse("weekly mon 09:30")
    assert s.next_after(dt.datetime(2026, 5, 16, 12, 0)) == dt.datetime(2026, 5, 18, 9, 30)


def test_weekly_wraps_to_next_week_when_today_is_after_target_time() -> None:
    s = Schedule.parse("weekly mon 09:30")
    assert s.next_after(dt.datetime(2026, 5, 18, 12, 0)) == dt.datetime(2026, 5, 25, 9, 30)


def test_daily_midnight_boundary() -> None:
    s = Schedule.parse("daily 00:05")
    assert s.next_after(dt.datetime(2026, 5, 16, 23, 30)) == dt.datetime(2026, 5, 17, 0, 5)


def test_interval_next_is_always_now_plus_d() -> None:
    now = dt.datetime(2026, 5, 16, 12, 0, 7)
    assert Schedule.parse("every 30s").next_after(now) == now + dt.timedelta(seconds=30)


def test_weekday_aliases_all_accepted() -> None:
    for day in ("mon", "monday", "Mon", "MONDAY", "sun", "sunday"):
        Schedule.parse(f"weekly {day} 09:30")
