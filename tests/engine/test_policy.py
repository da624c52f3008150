"""Levels, gates, budgets and specs: the reference's unit cases, in Python, and ours."""

from __future__ import annotations

from pathlib import Path

import pytest

from looop_py import (
    AllowlistGate,
    AlwaysEscalate,
    BudgetLimit,
    BudgetState,
    CallbackGate,
    GateDecision,
    LoopLevel,
    LoopSpec,
    ProposedAction,
    TokenBudget,
    default_gate_for,
)
from looop_py.engine.budget import DEFAULT_MAX_WALL_S, BudgetError
from looop_py.engine.spec import LoopSpecError, is_loop
from looop_py.errors import UsageError
from looop_py.loops.specs import spec_from_goal
from looop_py.workdir.frontmatter import GoalError, frontmatter
from tests.conftest import open_wd

# -- levels ------------------------------------------------------------------------


def test_only_l1_is_read_only() -> None:
    assert not LoopLevel.L1_REPORT.maker_may_write
    assert LoopLevel.L2_ASSISTED.maker_may_write
    assert LoopLevel.L3_UNATTENDED.maker_may_write


def test_level_labels_and_serialized_values() -> None:
    assert [lv.label for lv in LoopLevel] == ["L1-report", "L2-assisted", "L3-unattended"]
    assert [lv.value for lv in LoopLevel] == ["l1-report", "l2-assisted", "l3-unattended"]


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("L1-report", LoopLevel.L1_REPORT),
        ("l1-report", LoopLevel.L1_REPORT),
        ("L1", LoopLevel.L1_REPORT),
        ("l2", LoopLevel.L2_ASSISTED),
        (" L2-ASSISTED ", LoopLevel.L2_ASSISTED),
        ("L3_UNATTENDED", LoopLevel.L3_UNATTENDED),
        ("unattended", LoopLevel.L3_UNATTENDED),
        ("3", LoopLevel.L3_UNATTENDED),
    ],
)
def test_level_parse_accepts_labels_short_forms_any_case(text: str, level: LoopLevel) -> None:
    assert LoopLevel.parse(text) is level


@pytest.mark.parametrize("text", ["L4", "l1-assisted", "", "report-only"])
def test_level_parse_rejects_the_rest(text: str) -> None:
    with pytest.raises(UsageError):
        LoopLevel.parse(text)


# -- gates --------------------------------------------------------------------------


def test_always_escalate_never_proceeds_even_at_l3_on_verified_work() -> None:
    decision = AlwaysEscalate().decide(LoopLevel.L3_UNATTENDED, ProposedAction("commit", "x", True))
    assert not decision.is_auto and decision.reason


def test_default_gate_is_always_escalate_at_every_level() -> None:
    for level in LoopLevel:
        assert isinstance(default_gate_for(level), AlwaysEscalate)


def test_allowlist_gate_proceeds_only_at_l3_on_verified_allowlisted_work() -> None:
    gate = AllowlistGate(["comment", "commit"])
    assert gate.decide(LoopLevel.L3_UNATTENDED, ProposedAction("commit", "s", True)).is_auto

    other = gate.decide(LoopLevel.L3_UNATTENDED, ProposedAction("force-push", "s", True))
    assert not other.is_auto and "`force-push`" in (other.reason or "")

    unverified = gate.decide(LoopLevel.L3_UNATTENDED, ProposedAction("commit", "s", False))
    assert not unverified.is_auto and "verif" in (unverified.reason or "")

    l2 = gate.decide(LoopLevel.L2_ASSISTED, ProposedAction("commit", "s", True))
    assert not l2.is_auto and "L3" in (l2.reason or "")


def test_allowlist_gate_checks_level_before_verification_and_matches_exactly() -> None:
    gate = AllowlistGate(["commit"])
    # L2 and unverified: the level rule speaks first.
    reason = gate.decide(LoopLevel.L2_ASSISTED, ProposedAction("commit", "s", False)).reason
    assert reason is not None and "L3" in reason
    assert not gate.decide(LoopLevel.L3_UNATTENDED, ProposedAction("Commit", "s", True)).is_auto
    assert AllowlistGate("commit").allow_kinds == ("commit",)  # one string is one kind


def test_callback_gate_runs_its_function() -> None:
    seen: list[tuple[LoopLevel, str]] = []

    def decide(level: LoopLevel, action: ProposedAction) -> GateDecision:
        seen.append((level, action.kind))
        if action.kind == "ok":
            return GateDecision.auto_proceed()
        return GateDecision.escalate("not ok")

    gate = CallbackGate(decide)
    assert gate.decide(LoopLevel.L2_ASSISTED, ProposedAction("ok", "s", False)).is_auto
    assert gate.decide(LoopLevel.L3_UNATTENDED, ProposedAction("no", "s", True)).reason == "not ok"
    assert seen == [(LoopLevel.L2_ASSISTED, "ok"), (LoopLevel.L3_UNATTENDED, "no")]


# -- budgets ------------------------------------------------------------------------


def test_no_limits_never_exceeds() -> None:
    state = BudgetState(TokenBudget.iters(8))
    state.add(1_000_000, 1_000_000)
    assert state.exceeded() is None
    assert state.max_iters() == 8


def test_total_limit_trips_strictly_above() -> None:
    state = BudgetState(TokenBudget.iters(4).with_max_total_tokens(100))
    state.add(60, 30)
    assert state.exceeded() is None
    state.add(10, 0)
    assert state.total_tokens == 100 and state.exceeded() is None  # at the ceiling is fine
    state.add(10, 0)
    assert state.exceeded() is BudgetLimit.TOTAL


def test_input_and_output_limits_trip_independently_in_order() -> None:
    both = BudgetState(TokenBudget().with_max_input_tokens(50).with_max_output_tokens(50))
    both.add(51, 1)
    assert both.exceeded() is BudgetLimit.INPUT
    out = BudgetState(TokenBudget().with_max_output_tokens(50))
    out.add(1, 51)
    assert out.exceeded() is BudgetLimit.OUTPUT
    # All three crossed: input is named first, then output, then total.
    all3 = BudgetState(TokenBudget(10, 10, 10))
    all3.add(11, 11)
    assert all3.exceeded() is BudgetLimit.INPUT
    all3b = BudgetState(TokenBudget(None, 10, 10))
    all3b.add(11, 11)
    assert all3b.exceeded() is BudgetLimit.OUTPUT


def test_budget_defaults_helpers_and_labels() -> None:
    b = TokenBudget()
    assert (b.max_input_tokens, b.max_output_tokens, b.max_total_tokens) == (None, None, None)
    assert b.max_iters_per_round == 12 and b.max_wall_s == DEFAULT_MAX_WALL_S == 3600.0
    assert TokenBudget.from_dict({"max_wall_s": None}).max_wall_s is None  # no wall cap
    b2 = b.with_max_iters_per_round(3).with_max_wall_s(90).with_max_total_tokens(5)
    assert (b2.max_iters_per_round, b2.max_wall_s, b2.max_total_tokens) == (3, 90, 5)
    assert [lim.label for lim in BudgetLimit] == [
        "input-tokens",
        "output-tokens",
        "total-tokens",
        "wall-clock",
    ]
    assert TokenBudget.from_dict(b2.to_dict()) == b2


@pytest.mark.parametrize(
    "data",
    [
        {"max_total_tokens": -1},
        {"max_iters_per_round": 0},
        {"max_wall_s": 0},
        {"max_total_tokens": "lots"},
        {"max_total_tokens": 1.5},
        {"max_tokens": 5},
        [1, 2],
    ],
)
def test_budget_rejects_nonsense(data: object) -> None:
    with pytest.raises(BudgetError):
        TokenBudget.from_dict(data)


def test_budget_state_describes_the_limit_it_hit() -> None:
    state = BudgetState(TokenBudget().with_max_total_tokens(5), 4, 3)
    assert state.describe(BudgetLimit.TOTAL) == "total-tokens: 7 spent, limit 5"
    wall = BudgetState(TokenBudget().with_max_wall_s(1.5))
    assert wall.wall_exceeded(1.6) and not wall.wall_exceeded(1.5)
    assert wall.describe(BudgetLimit.WALL, 2.0) == "wall-clock: 2 s spent, limit 1.5 s"


# -- specs --------------------------------------------------------------------------


def test_spec_defaults() -> None:
    spec = LoopSpec("x", "do x", LoopLevel.L1_REPORT)
    assert spec.cadence == "daily 09:00" and spec.action_kind == "report"
    assert spec.budget == TokenBudget() and spec.maker_prompt == spec.checker_prompt == ""
    assert spec.claim_name == "loop-x"
    assert spec.with_target("repo").claim_name == "repo"


def test_spec_round_trips_through_json() -> None:
    spec = (
        LoopSpec("issue-triage", "label and route new issues", LoopLevel.L1_REPORT)
        .with_cadence("every 2h")
        .with_action_kind("comment")
    )
    back = LoopSpec.from_json(spec.to_json())
    assert back.name == "issue-triage"
    assert back.level is LoopLevel.L1_REPORT
    assert back.cadence == "every 2h"
    assert back.action_kind == "comment"
    assert back == spec


def test_full_spec_round_trips_through_dict() -> None:
    spec = LoopSpec(
        "ci",
        "keep it green",
        LoopLevel.L3_UNATTENDED,
        cadence='cron "*/5 * * * *"',
        budget=TokenBudget(1, 2, 3, 4, 5.5),
        maker_prompt="m",
        checker_prompt="c",
        action_kind="apply-patch",
        allow=("apply-patch",),
        on=("ci",),
        runtime="shell",
        target="repo-main",
    )
    assert LoopSpec.from_dict(spec.to_dict()) == spec


GOAL = """---
goal: Keep the default branch green
intent: Keep the default branch green by proposing fixes for CI failures.
level: L2-assisted
cadence: every 10m
budget: {max_total_tokens: 400000, max_iters_per_round: 20, max_wall_s: 1800}
action: apply-patch
allow: [apply-patch]
on: [ci]
runtime: claude
target: repo-main
maker: |
  Fix CI.
checker: |
  Check the fix.
---
Free-form notes.
"""


def test_spec_from_goal_reads_the_frontmatter(tmp_path: Path) -> None:
    path = tmp_path / "ci-sweeper.md"
    path.write_text(GOAL)
    spec = spec_from_goal(path)
    assert spec.name == "ci-sweeper"
    assert spec.intent.startswith("Keep the default branch green by")
    assert spec.level is LoopLevel.L2_ASSISTED and spec.cadence == "every 10m"
    assert spec.budget == TokenBudget(None, None, 400_000, 20, 1800)
    assert spec.action_kind == "apply-patch" and spec.allow == ("apply-patch",)
    assert spec.on == ("ci",) and spec.runtime == "claude" and spec.target == "repo-main"
    assert spec.maker_prompt == "Fix CI.\n" and spec.checker_prompt == "Check the fix.\n"


def test_goal_intent_falls_back_to_goal_and_level_to_l1(tmp_path: Path) -> None:
    path = tmp_path / "tidy.md"
    path.write_text("---\ngoal: Keep it tidy\ncadence: daily 07:00\n---\nbody\n")
    spec = spec_from_goal(path)
    assert spec.intent == "Keep it tidy" and spec.level is LoopLevel.L1_REPORT


@pytest.mark.parametrize(
    ("front", "needle"),
    [
        ("goal: g\ncadence: every 0s\n", "positive"),
        ("goal: g\ncadence: hourly\n", "not one of"),
        ("goal: g\nlevel: L9\n", "level"),
        ("cadence: every 5m\n", "intent"),
        ("goal: g\ncadance: every 5m\nlevel: L1\n", "did you mean 'cadence'"),
        ("goal: g\nlevel: L1\ntarget: ../etc\n", "not a safe name"),
        ("goal: g\nlevel: L1\nbudget: {max_tokens: 3}\n", "max_tokens"),
        ("goal: g\nlevel: L1\nallow: 3\n", "list of names"),
    ],
)
def test_bad_goal_loops_are_errors_that_say_why(tmp_path: Path, front: str, needle: str) -> None:
    path = tmp_path / "bad.md"
    path.write_text(f"---\n{front}---\n")
    with pytest.raises(LoopSpecError) as info:
        spec_from_goal(path)
    assert needle in str(info.value)


def test_a_goal_without_loop_keys_is_not_a_loop(tmp_path: Path) -> None:
    path = tmp_path / "welcome.md"
    path.write_text("---\ngoal: Keep healthy\non: [disk]\n---\nbody\n")
    assert not is_loop(frontmatter(path.read_text())[0])
    with pytest.raises(LoopSpecError, match="not a loop"):
        spec_from_goal(path)


def test_frontmatter_split() -> None:
    assert frontmatter("# just markdown\n") == ({}, "# just markdown\n")
    assert frontmatter("---\n---\nbody") == ({}, "body")
    meta, body = frontmatter("---\na: 1\nb: [x, y]\n...\nrest\n")
    assert meta == {"a": 1, "b": ["x", "y"]} and body == "rest\n"
    for bad in ("---\na: 1\n", "---\n- a\n- b\n---\n", "---\na: [\n---\n"):
        with pytest.raises(GoalError):
            frontmatter(bad)


def test_load_loops_lists_loops_and_names_broken_ones(tmp_path: Path) -> None:
    from looop_py.loops.specs import load_loops
    from looop_py.workdir.paths import Paths

    paths = Paths(tmp_path)
    paths.config.write_text("")  # every default
    paths.goals.mkdir()
    (paths.goals / "plain.md").write_text("---\ngoal: not a loop\non: [disk]\n---\n")
    (paths.goals / "ci.md").write_text(GOAL)
    (paths.goals / "bad.md").write_text("---\ngoal: g\ncadence: every 0s\n---\n")
    (paths.goals / "dup.md").write_text("---\nname: ci\ngoal: g\nlevel: L1\n---\n")
    (paths.goals / "torn.md").write_text("---\ngoal: [\n---\n")
    specs, errors = load_loops(open_wd(paths))
    assert [s.name for s in specs] == ["ci"]
    assert set(errors) == {"bad", "dup", "torn"}
    assert "positive" in errors["bad"] and "already used" in errors["dup"]
