"""Goal files: goals/<id>.md, plain markdown with optional YAML frontmatter."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from looop_py.errors import UsageError
from looop_py.ids import is_safe_segment
from looop_py.workdir.paths import Paths

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


def read_playbook(paths: Paths) -> bytes | None:
    """PLAYBOOK.md's bytes; None when there is none."""
    try:
        return paths.playbook.read_bytes()
    except FileNotFoundError:
        return None


def read_goals(paths: Paths) -> list[GoalFile]:
    goals: list[GoalFile] = []
    for goal_id, path in goal_paths(paths):
        try:
            goals.append(GoalFile(goal_id, path, path.read_bytes()))
        except FileNotFoundError:
            continue  # removed while we listed
    return goals


def create(paths: Paths, goal_id: str, text: str) -> Path:
    """Write goals/<id>.md only if no such file exists yet: a goal is never overwritten."""
    path = paths.goal(goal_id)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise UsageError(f"{path} already exists", "pick another id with --name") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


class GoalError(UsageError):
    """A goal file whose frontmatter cannot be read."""


@functools.cache
def _yaml12_loader() -> Any:
    """PyYAML's safe loader, except that only true/false are booleans (as in YAML 1.2).

    YAML 1.1 also reads on/off/yes/no as booleans, which would turn the `on:`
    key of a loop into `True`.
    """
    import re  # only for frontmatter

    import yaml  # only for a goal with frontmatter: plain goals never load it

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


def frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """Split a markdown file into its YAML frontmatter (a mapping) and its body.

    The frontmatter is the block between a first line `---` and the next line
    `---` (or `...`). A file without one is all body. PyYAML's safe loader is
    imported only here, and only when a fence is present, so reading goals
    stays cheap on the quiet path.
    """
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").rstrip() != "---":
        return {}, text
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r\n").rstrip() in ("---", "..."):
            break
    else:
        raise GoalError(
            "the frontmatter opened with `---` is never closed",
            "end it with a line holding only `---`",
        )
    import yaml  # only for frontmatter

    try:
        meta = yaml.load("".join(lines[1:i]), Loader=_yaml12_loader())  # noqa: S506 - safe loader
    except yaml.YAMLError as exc:
        raise GoalError(f"the frontmatter is not valid YAML: {exc}", "fix the YAML") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) for k in meta):
        raise GoalError(
            "the frontmatter must be a mapping of names to values",
            "write `key: value` lines between the fences",
        )
    return meta, "".join(lines[i + 1 :])


def render_frontmatter(meta: dict[str, Any], body: str) -> str:
    """The inverse of `frontmatter`: `---`, the mapping as YAML in the given key order, `---`."""
    import yaml  # only for frontmatter

    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=88)
    return f"---\n{head}---\n{body}"
