"""The documentation as data: README.md and looop_py/docs/*.md, their fenced blocks."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "looop_py" / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
RUNNABLE = {"sh", "bash", "python", "toml"}
NOT_RUN = re.compile(r"^\s*<!-- not run: (.+?) -->\s*$")
FENCE = re.compile(r"^( *)```([\w-]*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: its language, body (dedented), line, why it is not run (if so),
    and the ```text block right after it, which is the output it prints."""

    page: Path
    lang: str
    body: str
    line: int
    not_run: str | None = None
    output: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of `page`, outputs attached to the block before them."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    last_end = 0  # the line after the previous block's closing fence
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i] != f"{indent}```":
            body.append(lines[i][len(indent) :])
            i += 1
        i += 1  # the closing fence
        marker = NOT_RUN.match(lines[start - 1]) if start else None
        text = "\n".join(body) + "\n"
        previous = found[-1] if found else None
        between, last_end = lines[last_end:start], i
        if (
            lang == "text"
            and previous is not None
            and previous.lang in ("sh", "bash")
            and previous.output is None
            and not any(line.strip() for line in between)
        ):
            found[-1] = replace(previous, output=text)
            continue
        found.append(Block(page, lang, text, start + 1, marker.group(1) if marker else None))
    return found


def every_block() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def matches(expected: str, actual: str) -> bool:
    """Line by line, `…` in the expected text standing for any run of characters."""
    want, got = expected.rstrip("\n").splitlines(), actual.rstrip("\n").splitlines()
    if len(want) != len(got):
        return False
    for w, g in zip(want, got, strict=True):
        pattern = ".*?".join(re.escape(part) for part in w.split("…"))
        if not re.fullmatch(pattern, g):
            return False
    return True
