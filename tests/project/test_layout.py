"""The tree stays legible: every package shipped, every module small and in the Layout."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "looop_py"
MAX_LINES = 450


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_package_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in PACKAGE.rglob("__init__.py")}
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_no_module_outgrows_the_limit() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _modules()}
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"split these by concern (limit {MAX_LINES} lines): {over}"


def _readme_tree() -> set[str]:
    """Module paths docs/internals.md's Layout names (`beat/`, `    pulse.py`: beat/pulse.py)."""
    page = (PACKAGE / "docs" / "internals.md").read_text()
    layout = page.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named: set[str] = set()
    package = ""
    for line in layout.splitlines():
        if m := re.match(r"^  (\w+)/\s", line):
            package = m.group(1) + "/"
        elif m := re.match(r"^    (\w+\.py)\s", line):
            named.add(package + m.group(1))
        elif m := re.match(r"^  (\w+\.py)\s", line):
            named.add(m.group(1))
    return named


def test_the_layout_names_every_module() -> None:
    named = _readme_tree()
    every = {str(p.relative_to(PACKAGE)) for p in _modules()}
    # A subpackage's __init__.py needs a line only when it holds code.
    required = {m for m in every if not (m.endswith("/__init__.py") and "/" in m)}
    page = "docs/internals.md's Layout"
    assert not required - named, f"{page} does not name: {sorted(required - named)}"
    assert not named - every, f"{page} names what is gone: {sorted(named - every)}"


def _says_why(lines: list[str], i: int) -> bool:
    """A comment on the import, or on the group of imports (or blank lines) it belongs to."""
    while i >= 0:
        text = lines[i].strip()
        if "#" in text:
            return True
        if text and not text.startswith(("import ", "from ")):
            return False
        i -= 1
    return False


def test_a_function_local_import_says_why_outside_cli() -> None:
    """Imports go at the top unless start-up cost says otherwise, and then the line says so."""
    bare = []
    for path in _modules():
        if "cli" in path.relative_to(PACKAGE).parts:
            continue  # cli/__init__.py gives the one reason for all of them
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(fn):
                    local = isinstance(node, ast.Import | ast.ImportFrom)
                    if local and not _says_why(lines, node.lineno - 1):
                        text = lines[node.lineno - 1].strip()
                        bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text}")
    assert not bare, "say why each is not at the top (a comment):\n" + "\n".join(bare)
