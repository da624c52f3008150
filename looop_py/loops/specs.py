"""Loops as goal files: read a LoopSpec from goals/<id>.md, or write one from a pattern.

The engine parses a frontmatter dict into a LoopSpec; reading and writing
the files is this module's job. A goal file a model last wrote without a
human's approval (workdir/provenance.py) runs at most at L1, whatever level
it names: only a human's file, or one a human approved, raises a loop.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from looop_py.engine import patterns
from looop_py.engine.levels import LoopLevel
from looop_py.engine.patterns import goal_body, goal_frontmatter
from looop_py.engine.spec import LOOP_KEYS, LoopSpec, LoopSpecError, is_loop
from looop_py.errors import UsageError
from looop_py.workdir import config, goals, provenance
from looop_py.workdir.context import WorkDir
from looop_py.workdir.frontmatter import frontmatter, render_frontmatter
from looop_py.workdir.goalfile import read_goal
from looop_py.workdir.goals import goal_paths, outside_link
from looop_py.workdir.paths import Paths


def capped(paths: Paths | None, goal_id: str, data: bytes, spec: LoopSpec) -> LoopSpec:
    """The spec, at most L1 when a model last wrote its file without a human's approval."""
    if paths is None or spec.level is LoopLevel.L1_REPORT:
        return spec
    if provenance.written_by_model(paths, f"goals/{goal_id}.md", data):
        return spec.with_level(LoopLevel.L1_REPORT)
    return spec


def _goal_data(goal_id: str, path: Path) -> tuple[bytes, str]:
    """A goal's bytes and text, read within its cap; LoopSpecError names the goal when it
    cannot be read."""
    goal = read_goal(goal_id, path)
    if goal is None:
        raise LoopSpecError(f"cannot read goal {goal_id}: goals/{goal_id}.md is gone")
    if goal.error is not None:
        raise LoopSpecError(f"cannot read goal {goal_id}: {goal.error}")
    try:
        return goal.body, goal.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LoopSpecError(f"cannot read goal {goal_id}: not UTF-8 ({exc.reason})") from None


def spec_from_goal(path: Path, paths: Paths | None = None) -> LoopSpec:
    """Read `goals/<id>.md`; raises LoopSpecError if its frontmatter is not a loop.

    Given the work dir, a file a model wrote unapproved is capped at L1.
    """

    goal_id = path.name.removesuffix(".md")
    data, text = _goal_data(goal_id, path)
    meta, _body = frontmatter(text)
    if not is_loop(meta):
        raise LoopSpecError(
            f"goal {goal_id} is not a loop: its frontmatter has none of the loop keys",
            f"add some of: {', '.join(sorted(LOOP_KEYS))}",
        )
    return capped(paths, goal_id, data, LoopSpec.from_frontmatter(goal_id, meta))


def load_spec(wd: WorkDir, loop: str) -> LoopSpec:
    """The loop `loop` as goals/<loop>.md defines it now (at most L1 if a model wrote it)."""
    path = wd.paths.goal(loop)
    if not path.exists():
        raise UsageError(f"no loop {loop!r}: goals/{loop}.md does not exist", "see `looop loops`")
    why = outside_link(wd, path) or outside_link(wd, wd.paths.goals)
    if why:
        raise LoopSpecError(why)
    return spec_from_goal(path, wd.paths)


def load_loops(wd: WorkDir) -> tuple[list[LoopSpec], dict[str, str]]:
    """Every loop among goals/*.md, and a message for each goal that tries to be one and fails.

    A goal without loop keys is simply not listed; a broken loop is reported
    by goal id rather than stopping the others.
    """

    specs: list[LoopSpec] = []
    errors: dict[str, str] = {}
    names: dict[str, str] = {}
    for goal_id, path in goal_paths(wd):
        try:
            data, text = _goal_data(goal_id, path)
            meta, _body = frontmatter(text)
            if not is_loop(meta):
                continue
            spec = capped(wd.paths, goal_id, data, LoopSpec.from_frontmatter(goal_id, meta))
        except UsageError as exc:
            errors[goal_id] = str(exc)
            continue
        if spec.name in names:
            errors[goal_id] = f"loop name {spec.name!r} is already used by goal {names[spec.name]}"
            continue
        names[spec.name] = goal_id
        specs.append(spec)
    for goal_id, why in goals.refused(wd).items():
        errors[goal_id] = f"cannot read goal {goal_id}: {why}"
    return specs, errors


CADENCE_NOTE = (
    "Without a `cadence:` line a loop runs only on demand: `looop run NAME`, a\n"
    "`start_round` move, or a change in a sensor its `on:` names. Nothing fires on a\n"
    "schedule that is not written here.\n"
)


def goal_text(spec: LoopSpec) -> str:
    """A goal file (frontmatter and a short body) that defines this loop, ready to edit."""

    return render_frontmatter(goal_frontmatter(spec), goal_body(spec) + "\n" + CADENCE_NOTE)


def write_goal(wd: WorkDir, pattern: str, *, name: str | None = None) -> tuple[LoopSpec, Path]:
    """`looop new`: goals/<name>.md from a pattern (default name: the pattern's), never
    overwriting; ready to edit. Its `runtime:` is the configured agent runtime."""
    spec = patterns.by_name(pattern)
    if name:
        spec = replace(spec, name=name)
    spec = spec.with_runtime(spec.runtime or agent_runtime(wd.config))
    return spec, goals.create(wd.paths, spec.name, goal_text(spec))


def agent_runtime(cfg: config.Config) -> str:
    """The runtime a pattern's prose prompts go to: [workers] default_runtime unless it is
    `shell`, else the one [runtimes.NAME] that is not; refused when there is none."""
    if cfg.workers.default_runtime != "shell":
        return cfg.workers.default_runtime
    agents = sorted(n for n in cfg.runtimes if n != "shell")
    if len(agents) == 1:
        return agents[0]
    raise UsageError(
        "a pattern's maker and checker are prose for an agent, and the default runtime is"
        " `shell`, which would run them as bash"
        + (f" (several agent runtimes are configured: {', '.join(agents)})" if agents else ""),
        'set [workers] default_runtime = "claude" (or codex, pi, aider, or a [runtimes.NAME])'
        " in looop.toml, then run looop new again",
    )
