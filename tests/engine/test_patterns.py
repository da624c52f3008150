"""The seven ready-made loops."""

from __future__ import annotations

from pathlib import Path

import pytest

from looop_py import LoopLevel, Schedule, TokenBudget, patterns
from looop_py.errors import UsageError
from looop_py.loops.specs import goal_text, spec_from_goal

ORDER = [
    "daily-triage",
    "pr-babysitter",
    "ci-sweeper",
    "dependency-sweeper",
    "changelog-drafter",
    "post-merge-cleanup",
    "issue-triage",
]


def test_catalogue_has_seven_uniquely_named_loops_in_order() -> None:
    names = [s.name for s in patterns.catalogue()]
    assert names == ORDER
    assert len(set(names)) == 7


def test_sweepers_are_assisted_everything_else_reports() -> None:
    for spec in patterns.catalogue():
        expected = LoopLevel.L2_ASSISTED if "sweeper" in spec.name else LoopLevel.L1_REPORT
        assert spec.level is expected, spec.name
    assert patterns.ci_sweeper().level is LoopLevel.L2_ASSISTED
    assert patterns.dependency_sweeper().level is LoopLevel.L2_ASSISTED
    assert patterns.daily_triage().level is LoopLevel.L1_REPORT
    assert patterns.issue_triage().level is LoopLevel.L1_REPORT


def test_every_pattern_cadence_parses() -> None:
    for spec in patterns.catalogue():
        Schedule.parse(spec.cadence)
        spec.check()


def test_the_table_of_cadences_actions_and_budgets() -> None:
    table = {
        s.name: (s.cadence, s.action_kind, s.budget.max_iters_per_round, s.budget.max_total_tokens)
        for s in patterns.catalogue()
    }
    assert table == {
        "daily-triage": ("daily 09:00", "report", 10, None),
        "pr-babysitter": ("every 10m", "comment", 8, None),
        "ci-sweeper": ("every 10m", "apply-patch", 20, 400_000),
        "dependency-sweeper": ("daily 04:00", "open-pr", 16, 300_000),
        "changelog-drafter": ("daily 18:00", "draft", 10, None),
        "post-merge-cleanup": ("every 6h", "report", 10, None),
        "issue-triage": ("every 2h", "comment", 8, None),
    }
    for spec in patterns.catalogue():
        b = spec.budget
        assert (b.max_input_tokens, b.max_output_tokens, b.max_wall_s) == (None, None, 3600.0)
        assert spec.intent and spec.maker_prompt and spec.checker_prompt
        assert not spec.allow and spec.target is None


def test_prompts_are_the_upstream_text() -> None:
    ci = patterns.ci_sweeper()
    assert ci.intent == "Keep the default branch green by proposing fixes for CI failures."
    assert ci.maker_prompt.startswith("If CI is failing, reproduce the failure, find the root")
    assert ci.checker_prompt.endswith("Report DoneWithConcerns if the fix looks risky or broad.")
    assert "  " not in "".join(s.maker_prompt + s.checker_prompt for s in patterns.catalogue())


def test_by_name_and_a_goal_file_that_reads_back(tmp_path: Path) -> None:
    assert patterns.by_name("ci_sweeper") == patterns.ci_sweeper()
    with pytest.raises(UsageError, match="patterns: daily-triage"):
        patterns.by_name("nope")
    for spec in patterns.catalogue():
        path = tmp_path / f"{spec.name}.md"
        path.write_text(goal_text(spec))
        assert spec_from_goal(path) == spec
    custom = patterns.ci_sweeper().with_on("ci").with_allow("apply-patch").with_target("repo")
    custom = custom.with_budget(TokenBudget.iters(3).with_max_wall_s(60))
    path = tmp_path / "ci-sweeper.md"
    path.write_text(goal_text(custom))
    assert spec_from_goal(path) == custom
