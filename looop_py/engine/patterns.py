"""Seven ready-made loops, each a LoopSpec to start from.

Start a loop at the level given here and raise it as it earns trust:

    pattern              cadence       level  action       iters  total tokens
    daily-triage         daily 09:00   L1     report       10     -
    pr-babysitter        every 10m     L1     comment      8      -
    ci-sweeper           every 10m     L2     apply-patch  20     400,000
    dependency-sweeper   daily 04:00   L2     open-pr      16     300,000
    changelog-drafter    daily 18:00   L1     draft        10     -
    post-merge-cleanup   every 6h      L1     report       10     -
    issue-triage         every 2h      L1     comment      8      -

The names, intents, prompts, levels, cadences, budgets and action kinds are
the reference engine's, kept word for word so loops behave the same in both.
An eighth, `demo` (in `offered()`, not the catalogue), is looop-py's own: bash
for the offline `shell` runtime, so a whole round runs without an agent CLI.
"""

from __future__ import annotations

from looop_py.engine.budget import TokenBudget
from looop_py.engine.levels import LoopLevel
from looop_py.engine.spec import LoopSpec
from looop_py.errors import UsageError


def daily_triage() -> LoopSpec:
    """Report-only: the cheapest loop to begin with."""
    return LoopSpec(
        name="daily-triage",
        intent="Surface anything in the project that needs human attention today.",
        level=LoopLevel.L1_REPORT,
        cadence="daily 09:00",
        budget=TokenBudget.iters(10),
        maker_prompt=(
            "Review recent activity (open issues, failing checks, stale branches, TODOs) "
            "and list the few items that most need attention today, with a one-line "
            "reason each. Be terse."
        ),
        checker_prompt=(
            "Confirm each surfaced item is real and not already resolved. Drop anything stale."
        ),
        action_kind="report",
    )


def pr_babysitter() -> LoopSpec:
    """Runs often, so its budget is tight."""
    return LoopSpec(
        name="pr-babysitter",
        intent="Keep open PRs moving; flag any that are stuck.",
        level=LoopLevel.L1_REPORT,
        cadence="every 10m",
        budget=TokenBudget.iters(8),
        maker_prompt=(
            "For each open PR, determine if it is blocked (red CI, conflicts, unanswered "
            "review, idle > 24h). List only the blocked ones and the single next action "
            "each needs."
        ),
        checker_prompt="Verify each flagged PR is genuinely blocked right now.",
        action_kind="comment",
    )


def ci_sweeper() -> LoopSpec:
    """Assisted: careful, and it can get expensive."""
    return LoopSpec(
        name="ci-sweeper",
        intent="Keep the default branch green by proposing fixes for CI failures.",
        level=LoopLevel.L2_ASSISTED,
        cadence="every 10m",
        budget=TokenBudget.iters(20).with_max_total_tokens(400_000),
        maker_prompt=(
            "If CI is failing, reproduce the failure, find the root cause, and make the "
            "smallest change that fixes it. If you cannot fix it confidently, explain what "
            "you found and stop."
        ),
        checker_prompt=(
            "Run the build and the failing tests. Confirm they now pass and that nothing "
            "else regressed. Report DoneWithConcerns if the fix looks risky or broad."
        ),
        action_kind="apply-patch",
    )


def dependency_sweeper() -> LoopSpec:
    """Assisted, patch and minor updates only, once a day."""
    return LoopSpec(
        name="dependency-sweeper",
        intent="Keep dependencies current via small, verified update PRs.",
        level=LoopLevel.L2_ASSISTED,
        cadence="daily 04:00",
        budget=TokenBudget.iters(16).with_max_total_tokens(300_000),
        maker_prompt=(
            "Identify outdated dependencies with low-risk updates (patch/minor). Update "
            "them and adjust any code the update requires. One coherent batch only."
        ),
        checker_prompt=(
            "Build and test against the updated dependencies. Confirm green. Flag any "
            "major-version or behaviour-changing update for human review."
        ),
        action_kind="open-pr",
    )


def changelog_drafter() -> LoopSpec:
    """Report-only, in the evening."""
    return LoopSpec(
        name="changelog-drafter",
        intent="Draft accurate, readable changelog entries from recent changes.",
        level=LoopLevel.L1_REPORT,
        cadence="daily 18:00",
        budget=TokenBudget.iters(10),
        maker_prompt=(
            "Summarize changes merged since the last release into changelog entries "
            "grouped by Added / Changed / Fixed. User-facing language."
        ),
        checker_prompt=(
            "Confirm each entry maps to a real change and nothing significant is missing."
        ),
        action_kind="draft",
    )


def post_merge_cleanup() -> LoopSpec:
    """Report-only, a few times a day."""
    return LoopSpec(
        name="post-merge-cleanup",
        intent="Catch loose ends left behind by recent merges.",
        level=LoopLevel.L1_REPORT,
        cadence="every 6h",
        budget=TokenBudget.iters(10),
        maker_prompt=(
            "Look for cleanup opportunities from recently merged work: merged branches not "
            "deleted, newly dead code, TODOs introduced, docs that drifted. List concrete "
            "items."
        ),
        checker_prompt="Confirm each cleanup item is still applicable.",
        action_kind="report",
    )


def issue_triage() -> LoopSpec:
    """Report-only: proposes triage, applies none."""
    return LoopSpec(
        name="issue-triage",
        intent="Label, prioritize, and route incoming issues consistently.",
        level=LoopLevel.L1_REPORT,
        cadence="every 2h",
        budget=TokenBudget.iters(8),
        maker_prompt=(
            "For each new, untriaged issue, propose labels, a priority, and an owner/area, "
            "with a one-line justification. Propose only."
        ),
        checker_prompt=(
            "Sanity-check the proposed triage against the issue text; flag any that need a human."
        ),
        action_kind="comment",
    )


# The demo's maker and checker: bash for the offline `shell` runtime, no agent CLI, no model.
_DEMO_MAKER = """\
goals=$(find "$LOOOP_DIR/goals" -maxdepth 1 -name '*.md' | wc -l)
sensors=$(find "$LOOOP_DIR/sensors" -maxdepth 1 -name '*.sh' | wc -l)
said="this work dir has $goals goal(s) and $sensors sensor(s)"
echo "$said"
"$LOOOP_BIN" done --summary "proposal: note that $said"
"""
_DEMO_CHECKER = """\
goals=$(find "$LOOOP_DIR/goals" -maxdepth 1 -name '*.md' | wc -l)
sensors=$(find "$LOOOP_DIR/sensors" -maxdepth 1 -name '*.sh' | wc -l)
"$LOOOP_BIN" done --summary "confirmed: this work dir has $goals goal(s) and $sensors sensor(s)"
"""


def demo() -> LoopSpec:
    """looop-py's own, not the reference's: a whole L2 round offline, on the `shell`
    runtime (its maker and checker are bash), so a newcomer sees a round, its gate and an
    approval without an agent CLI. On demand only (no cadence): `looop run demo`."""
    return LoopSpec(
        name="demo",
        intent="Show a whole round offline: a maker proposes, a checker confirms, you approve.",
        level=LoopLevel.L2_ASSISTED,
        cadence="",
        budget=TokenBudget.iters(4),
        maker_prompt=_DEMO_MAKER,
        checker_prompt=_DEMO_CHECKER,
        action_kind="note",
        runtime="shell",
    )


def catalogue() -> list[LoopSpec]:
    """The reference's seven, in its order."""
    return [
        daily_triage(),
        pr_babysitter(),
        ci_sweeper(),
        dependency_sweeper(),
        changelog_drafter(),
        post_merge_cleanup(),
        issue_triage(),
    ]


def offered() -> list[LoopSpec]:
    """What `looop patterns` lists and `looop new` writes: the seven, then the demo."""
    return [*catalogue(), demo()]


def by_name(name: str) -> LoopSpec:
    """One pattern by its name (`ci-sweeper`) or function name (`ci_sweeper`)."""
    key = name.strip().lower().replace("_", "-")
    for spec in offered():
        if spec.name == key:
            return spec

    names = ", ".join(s.name for s in offered())
    raise UsageError(f"no pattern named {name!r}", f"patterns: {names}")


def goal_frontmatter(spec: LoopSpec) -> dict[str, object]:
    """The frontmatter of a goal file that defines this loop (loops/index.py writes it)."""
    meta: dict[str, object] = {
        "intent": spec.intent,
        "level": spec.level.label,
        **({"cadence": spec.cadence} if spec.cadence else {}),  # none: on demand only
        "budget": {k: v for k, v in spec.budget.to_dict().items() if v is not None},
        "action": spec.action_kind,
    }
    for key, value in (
        ("allow", list(spec.allow)),
        ("on", list(spec.on)),
        ("runtime", spec.runtime),
        ("maker_runtime", spec.maker_runtime),
        ("checker_runtime", spec.checker_runtime),
        ("target", spec.target),
    ):
        if value:
            meta[key] = value
    meta["maker"] = spec.maker_prompt
    meta["checker"] = spec.checker_prompt
    return meta


def goal_body(spec: LoopSpec) -> str:
    """The short markdown body under that frontmatter."""
    return (
        f"# {spec.name}\n\n"
        f"{spec.intent}\n\n"
        "This goal is a loop: the frontmatter above sets its level, cadence, budget and\n"
        "prompts. Start at the level given and raise it as the loop earns trust; at\n"
        "L3-unattended only the action kinds listed under `allow:` run without a human.\n"
    )
