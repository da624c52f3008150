"""The README's Python works: every ```python snippet runs (offline, in a temp dir,
after `looop init work` there), and every `looop_py.…` path it names imports."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SNIPPETS = [  # fenced at any indent (a snippet inside a list item is indented)
    textwrap.dedent(body)
    for _, body in re.findall(r"^( *)```python\n(.*?)^\1```", README, re.S | re.M)
]
API_PATHS = sorted(set(re.findall(r"`(looop_py(?:\.\w+)+)", README)))


def resolve(path: str) -> object:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(path)


def test_a_path_that_does_not_import_is_caught() -> None:
    with pytest.raises(AttributeError):
        resolve("looop_py.engine.patterns.catalog")  # a misspelt function
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        resolve("looop_py.engine.no_such_module.thing")


def test_the_readme_names_api_paths_and_has_snippets() -> None:
    assert "looop_py.engine.patterns.catalogue" in API_PATHS
    assert len(SNIPPETS) >= 2, "the README's Python snippets went missing"


@pytest.mark.parametrize("path", API_PATHS)
def test_every_api_path_in_the_readme_imports(path: str) -> None:
    resolve(path)


@pytest.mark.parametrize("n", range(len(SNIPPETS)))
def test_every_python_snippet_in_the_readme_runs(n: int, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOOP_")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT), NO_PROXY="*", no_proxy="*")
    looop = [sys.executable, "-m", "looop_py"]
    subprocess.run([*looop, "init", "work"], cwd=tmp_path, env=env, check=True, timeout=60)
    done = subprocess.run(
        [sys.executable, "-c", SNIPPETS[n]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"snippet {n}:\n{SNIPPETS[n]}\n{done.stderr}"
