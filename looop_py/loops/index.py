"""Which goals are loops, and their cadences: the cheap index the pulse reads every beat.

It is asked on every beat (for ADVANCE and the sys-schedules probe), so it is
cached by goal-file stat in state/loops-index.json, imports nothing heavy, and
parses a goal's YAML only when the file changed since the last beat; a goal
without frontmatter is never parsed. A goal without a `---` fence has no entry here
(the goal cache, workdir/goalcache.py, knows it by its stat): at 10,000 plain goals
the index holds only the fenced ones. specs.py reads the full LoopSpecs.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.errors import LooopError
from looop_py.workdir.frontmatter import frontmatter
from looop_py.workdir.goalfile import read_goal_once
from looop_py.workdir.goals import maybe_fenced

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir


def index(wd: WorkDir, *, save: bool = True) -> dict[str, dict[str, Any]]:
    """{goal id: {"cadence": str|None, "error": str|None}} for every goal that is a loop.

    Goals are parsed only when their file changed since the last call; within a
    beat's one pass over goals/ (`wd.memo.scope()`) the index is worked out once.
    """
    found = wd.memo.once(("loops-index", wd.paths.loops_index), lambda: _index(wd, save=save))
    return dict(found)


def _index(wd: WorkDir, *, save: bool) -> dict[str, dict[str, Any]]:
    paths = wd.paths
    cached = _read(wd, paths.loops_index)
    fits = isinstance(cached, dict) and cached.get("v") == VERSION
    entries = cached.get("goals") if fits else None
    if not isinstance(entries, dict):
        entries = {}  # a cache that does not fit is rebuilt from the goal files
    fresh: dict[str, Any] = {}
    changed = False
    # The stat goals/ was listed with, taken once, of the goals that may open a `---` fence:
    # a goal with none (says the goal side or cache) is no loop and has no entry here; nor
    # does one gone, or a link to nowhere or to itself.
    for goal_id, stamp in maybe_fenced(wd):
        entry = entries.get(goal_id)
        held = entry if isinstance(entry, str) else _get(entry, "stamp")
        if held != stamp:
            described = _describe(wd, goal_id, paths.goals / f"{goal_id}.md")
            if described is None:
                continue  # no fence: no entry (SENSE's read tells the goal cache so)
            # A goal that is no loop is its stamp alone: at 10,000 goals the file stays flat,
            # so reading it never walks 10,000 objects for their depth.
            entry = {"stamp": stamp, **described} if described.get("loop") else stamp
            changed = True
        fresh[goal_id] = entry
    if save and (changed or not fits or set(fresh) != set(entries)):  # a stale one: once
        with contextlib.suppress(OSError):
            # Compact: at thousands of goals, pretty-printing doubled what every beat reads.
            record = {"v": VERSION, "goals": fresh}
            jsonio.atomic_write(paths.loops_index, jsonio.dumps(record) + b"\n")
    return {g: e for g, e in fresh.items() if isinstance(e, dict) and e.get("loop")}


# 2: a goal that is no loop is its stamp string alone; 3: the full stat (ctime too), and
# no entry for a goal without a fence
VERSION = 3


def _get(entry: Any, key: str) -> Any:
    return entry.get(key) if isinstance(entry, dict) else None


def _read(wd: WorkDir, path: Path) -> Any:
    """The index file parsed; a beat asks twice (ADVANCE and the sys-schedules probe) and
    parses it once, kept on the WorkDir by the file's stat."""
    try:
        stamp = jsonio.file_stamp(path)
    except OSError:
        return {}
    return wd.memo.keep(("loops-index-file", path), stamp, lambda: _parse(path))


def _parse(path: Path) -> dict[str, Any]:
    return jsonio.read_object(path) or {}


def _describe(wd: WorkDir, goal_id: str, path: Path) -> dict[str, Any] | None:
    """Whether the goal is a loop, and its cadence; None: it opens no `---` fence."""
    goal = read_goal_once(wd, goal_id, path)
    if goal is None or goal.error is not None:
        return {"loop": False}  # unreadable goals are reported by SENSE and `looop loops`
    if not goal.fenced:
        return None  # no frontmatter: not a loop, and no YAML to parse
    from looop_py.engine.spec import LoopSpec, is_loop  # only for a goal edited since

    try:
        meta, _ = frontmatter(goal.body.decode("utf-8"))
        if not is_loop(meta):
            return {"loop": False}
        spec = LoopSpec.from_frontmatter(goal_id, meta)
    except (LooopError, OSError, UnicodeDecodeError) as exc:
        return {"loop": True, "cadence": None, "error": str(exc)}
    return {"loop": True, "cadence": spec.cadence or None, "error": None}


def cadences(loops: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {g: e["cadence"] for g, e in loops.items() if e.get("cadence") and not e.get("error")}
