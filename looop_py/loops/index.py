"""Which goals are loops: the cheap index the pulse reads, and the full specs.

`index` is asked on every beat (for ADVANCE and the sys-schedules probe), so
it is cached by goal-file stat in state/loops-index.json, imports nothing
heavy, and parses a goal's YAML only when the file changed since the last
beat; a goal without frontmatter is never parsed. `load_loops`, `load_spec`
and `spec_from_goal` turn goal files into LoopSpecs (the engine parses the
frontmatter dict; reading the file is this module's job).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import CorruptFile, LooopError, UsageError
from looop_py.workdir.goals import goal_paths
from looop_py.workdir.paths import Paths

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.engine.spec import LoopSpec


def index(paths: Paths, *, save: bool = True) -> dict[str, dict[str, Any]]:
    """{goal id: {"cadence": str|None, "error": str|None}} for every goal that is a loop.

    Goals are parsed only when their file changed since the last call.
    """
    try:
        cached = jsonio.read_json(paths.loops_index, {})
    except CorruptFile:
        cached = {}
    entries = cached.get("goals", {}) if isinstance(cached, dict) else {}
    fresh: dict[str, Any] = {}
    changed = False
    for goal_id, path in goal_paths(paths):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        stamp = [st.st_mtime_ns, st.st_size, st.st_ino]
        entry = entries.get(goal_id)
        if not isinstance(entry, dict) or entry.get("stamp") != stamp:
            entry = {"stamp": stamp, **_describe(goal_id, path)}
            changed = True
        fresh[goal_id] = entry
    if save and (changed or set(fresh) != set(entries)):
        with contextlib.suppress(OSError):
            jsonio.write_json(paths.loops_index, {"v": 1, "goals": fresh})
    return {g: e for g, e in fresh.items() if e.get("loop")}


def _describe(goal_id: str, path: Path) -> dict[str, Any]:
    try:
        head = path.read_bytes()[:3]
    except OSError:
        return {"loop": False}
    if head != b"---":
        return {"loop": False}  # no frontmatter: not a loop, and no YAML to parse
    from looop_py.engine.spec import LoopSpec, is_loop
    from looop_py.workdir.goals import frontmatter

    try:
        meta, _ = frontmatter(path.read_text(encoding="utf-8"))
        if not is_loop(meta):
            return {"loop": False}
        spec = LoopSpec.from_frontmatter(goal_id, meta)
    except (LooopError, OSError, UnicodeDecodeError) as exc:
        return {"loop": True, "cadence": None, "error": str(exc)}
    return {"loop": True, "cadence": spec.cadence or None, "error": None}


def cadences(loops: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {g: e["cadence"] for g, e in loops.items() if e.get("cadence") and not e.get("error")}


# -- specs from goal files ----------------------------------------------------------------


def spec_from_goal(path: Path) -> LoopSpec:
    """Read `goals/<id>.md`; raises LoopSpecError if its frontmatter is not a loop."""
    from looop_py.engine.spec import LOOP_KEYS, LoopSpec, LoopSpecError, is_loop
    from looop_py.workdir.goals import frontmatter

    goal_id = path.name.removesuffix(".md")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LoopSpecError(f"cannot read goal {path}: {exc}") from None
    meta, _body = frontmatter(text)
    if not is_loop(meta):
        raise LoopSpecError(
            f"goal {goal_id} is not a loop: its frontmatter has none of the loop keys",
            f"add some of: {', '.join(sorted(LOOP_KEYS))}",
        )
    return LoopSpec.from_frontmatter(goal_id, meta)


def load_spec(paths: Paths, loop: str) -> LoopSpec:
    """The loop `loop` as goals/<loop>.md defines it now."""
    path = paths.goal(loop)
    if not path.exists():
        raise UsageError(f"no loop {loop!r}: goals/{loop}.md does not exist", "see `looop loops`")
    return spec_from_goal(path)


def load_loops(paths: Paths) -> tuple[list[LoopSpec], dict[str, str]]:
    """Every loop among goals/*.md, and a message for each goal that tries to be one and fails.

    A goal without loop keys is simply not listed; a broken loop is reported
    by goal id rather than stopping the others.
    """
    from looop_py.engine.spec import LoopSpec, is_loop
    from looop_py.workdir.goals import frontmatter

    specs: list[LoopSpec] = []
    errors: dict[str, str] = {}
    names: dict[str, str] = {}
    for goal_id, path in goal_paths(paths):
        try:
            meta, _body = frontmatter(path.read_text(encoding="utf-8"))
            if not is_loop(meta):
                continue
            spec = LoopSpec.from_frontmatter(goal_id, meta)
        except (OSError, UnicodeDecodeError) as exc:
            errors[goal_id] = f"cannot read goal {goal_id}: {exc}"
            continue
        except UsageError as exc:
            errors[goal_id] = str(exc)
            continue
        if spec.name in names:
            errors[goal_id] = f"loop name {spec.name!r} is already used by goal {names[spec.name]}"
            continue
        names[spec.name] = goal_id
        specs.append(spec)
    return specs, errors


def goal_text(spec: LoopSpec) -> str:
    """A goal file (frontmatter and a short body) that defines this loop, ready to edit."""
    from looop_py.engine.patterns import goal_body, goal_frontmatter
    from looop_py.workdir.goals import render_frontmatter

    return render_frontmatter(goal_frontmatter(spec), goal_body(spec))
