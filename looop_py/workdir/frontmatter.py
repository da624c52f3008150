"""Goal frontmatter: the YAML block between `---` fences at the top of a goal file.

PyYAML is imported only here, and only for a file that opens a fence: plain goals never
load it.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from looop_py import jsonio
from looop_py.errors import UsageError

FRONTMATTER_MAX_VALUES = 100_000  # YAML aliases can expand a small file enormously


class GoalError(UsageError):
    """A goal file whose frontmatter cannot be read."""


@functools.cache
def _yaml12_loader() -> Any:
    """PyYAML's safe loader, except that only true/false are booleans (as in YAML 1.2).

    YAML 1.1 also reads on/off/yes/no as booleans, which would turn the `on:`
    key of a loop into `True`.
    """

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
    head = "".join(lines[1:i])
    if _bracket_depth(head) > 4 * jsonio.MAX_DEPTH:  # spare the parser a stack overflow
        raise GoalError(
            f"the frontmatter nests more than {jsonio.MAX_DEPTH} levels deep",
            "flatten it: a loop needs a few levels",
        )
    import yaml  # only for frontmatter

    try:
        meta = yaml.load(head, Loader=_yaml12_loader())  # noqa: S506 - safe loader
    except yaml.YAMLError as exc:
        raise GoalError(f"the frontmatter is not valid YAML: {exc}", "fix the YAML") from None
    except RecursionError:
        raise GoalError(
            "the frontmatter nests too deep to read", "flatten it: a loop needs a few levels"
        ) from None
    if meta is None:
        meta = {}
    problem = jsonio.shape_problem(meta, max_nodes=FRONTMATTER_MAX_VALUES)
    if problem is not None:
        raise GoalError(f"the frontmatter {problem}", "flatten it: a loop needs a few levels")
    if not isinstance(meta, dict) or not all(isinstance(k, str) for k in meta):
        raise GoalError(
            "the frontmatter must be a mapping of names to values",
            "write `key: value` lines between the fences",
        )
    return meta, "".join(lines[i + 1 :])


def _bracket_depth(text: str) -> int:
    """How deep `[`/`{` open at most, ignoring quotes: a cheap bound, for bombs only."""
    if text.count("[") + text.count("{") <= 4 * jsonio.MAX_DEPTH:
        return 0

    depth = deepest = 0
    for bracket in re.findall(r"[\[\]{}]", text):
        depth = depth + 1 if bracket in "[{" else max(0, depth - 1)
        deepest = max(deepest, depth)
    return deepest


def render_frontmatter(meta: dict[str, Any], body: str) -> str:
    """The inverse of `frontmatter`: `---`, the mapping as YAML in the given key order, `---`."""
    import yaml  # only for frontmatter

    class Dumper(yaml.SafeDumper):
        """Multi-line text (a shell maker's script) as a `|` block, as a person writes it."""

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    head = yaml.dump(meta, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=88)
    return f"---\n{head}---\n{body}"
