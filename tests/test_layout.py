"""The tree stays legible: every package shipped, every module small and in the README."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


def test_the_readme_layout_names_every_module() -> None:
    readme = (ROOT / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"[\w/]+\.py", layout))
    missing = [
        rel
        for path in _modules()
        if (rel := str(path.relative_to(PACKAGE))) not in named
        and not (rel.endswith("/__init__.py") and rel.count("/") == 1)
    ]
    assert not missing, f"the README's Layout section does not name: {missing}"
