"""Goal files: goals/<id>.md, plain markdown with optional YAML frontmatter."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from looop_py.errors import UsageError
from looop_py.paths import Paths, is_safe_segment

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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


def frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """Split a goal into its YAML frontmatter (between `---` fences) and its body.

    A goal without frontmatter is still a goal: ({}, text). Frontmatter that is
    not a YAML mapping raises UsageError naming the problem.
    """
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    end = next((i for i, line in enumerate(lines) if i and line.strip() in ("---", "...")), 0)
    if not end:
        return {}, text  # no closing fence: treat it all as body
    import yaml  # only goals with frontmatter pay for PyYAML

    try:
        data = yaml.load("\n".join(lines[1:end]), Loader=_loader()) or {}  # noqa: S506 - safe loader
    except yaml.YAMLError as exc:
        raise UsageError(
            f"bad YAML frontmatter: {exc}", "fix the block between the --- fences"
        ) from None
    if not isinstance(data, dict):
        raise UsageError("frontmatter must be a YAML mapping (key: value lines)")
    return data, "\n".join(lines[end + 1 :])


def _loader() -> Any:
    """PyYAML's safe loader with YAML 1.2 booleans.

    YAML 1.1 reads on/off/yes/no as booleans, which would turn the `on:` key
    of a goal into True; here only true/false are booleans.
    """
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    bool_tag = "tag:yaml.org,2002:bool"
    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != bool_tag]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    Loader.add_implicit_resolver(
        bool_tag, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
    )
    return Loader
