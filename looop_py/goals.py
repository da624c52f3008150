"""Goal files: goals/<id>.md, plain markdown with optional YAML frontmatter."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from looop_py.paths import Paths, is_safe_segment


@dataclass(frozen=True)
class GoalFile:
    id: str
    path: Path
    body: bytes


def goal_paths(paths: Paths) -> list[tuple[str, Path]]:
    """(id, path) of every top-level goals/*.md, sorted by id; archive/ is not read."""
    try:
        entries = os.scandir(paths.goals)
    except FileNotFoundError:
        return []
    found: list[tuple[str, Path]] = []
    with entries:
        for entry in entries:
            goal_id = entry.name.removesuffix(".md")
            if goal_id != entry.name and is_safe_segment(goal_id) and entry.is_file():
                found.append((goal_id, Path(entry.path)))
    found.sort()
    return found


def read_goals(paths: Paths) -> list[GoalFile]:
    goals: list[GoalFile] = []
    for goal_id, path in goal_paths(paths):
        try:
            goals.append(GoalFile(goal_id, path, path.read_bytes()))
        except FileNotFoundError:
            continue  # removed while we listed
    return goals
