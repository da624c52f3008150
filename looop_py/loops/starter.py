"""`looop new`: a goal file written from one of the ready-made loop patterns."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from looop_py.engine import patterns
from looop_py.engine.spec import LoopSpec
from looop_py.workdir import goals
from looop_py.workdir.paths import Paths


def write_goal(paths: Paths, pattern: str, *, name: str | None = None) -> tuple[LoopSpec, Path]:
    """Write goals/<name>.md (default: the pattern's name), ready to edit; never overwrites."""
    spec = patterns.by_name(pattern)
    if name:
        spec = replace(spec, name=name)
    return spec, goals.create(paths, spec.name, patterns.goal_text(spec))
