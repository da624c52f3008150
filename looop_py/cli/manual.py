"""The manual that ships with the tool: `looop help TOPIC` prints looop_py/docs/TOPIC.md.

The reference pages are the one source: the same Markdown files read on GitHub (linked
from README.md) and printed here, shipped inside the wheel as package data.
"""

from __future__ import annotations

from importlib import resources

# The topics in the order `looop help` lists them; tests/project/test_docs.py checks that
# they are exactly the pages in looop_py/docs/.
TOPICS = (
    "sensors",
    "goals",
    "loops",
    "moves",
    "deciders",
    "workers",
    "safety",
    "page",
    "coordination",
    "configuration",
    "cli",
    "internals",
    "benchmarks",
)


def page(topic: str) -> str:
    """The text of one reference page."""
    return resources.files("looop_py").joinpath("docs", f"{topic}.md").read_text("utf-8")


def pages() -> dict[str, str]:
    """Every reference page by topic."""
    return {topic: page(topic) for topic in TOPICS}
