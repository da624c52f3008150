"""The README's set-up commands stay true, and every `looop_py.…` path the README and the
reference pages name imports (their examples themselves run in test_examples.py)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.project.docs import PAGES, ROOT, blocks

README = ROOT / "README.md"
API_PATHS = sorted(
    {path for page in PAGES for path in re.findall(r"`(looop_py(?:\.\w+)+)", page.read_text())}
)
SETUP = [b.body.strip() for b in blocks(README) if b.lang == "sh"][:2]


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


def test_the_pages_name_api_paths() -> None:
    assert "looop_py.engine.patterns.catalogue" in API_PATHS


@pytest.mark.parametrize("path", API_PATHS)
def test_every_api_path_in_the_docs_imports(path: str) -> None:
    resolve(path)


def test_the_second_set_up_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert (
        SETUP[1]
        == "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/pytest -q"
    )
    assert "python3 -m venv .venv\n" in ci and "\n.venv/bin/pytest -q\n" in ci
    assert re.search(r"pip install --quiet -e '\.\[dev[,\]]", ci)


@pytest.mark.slow
def test_the_first_set_up_command_runs_after_its_install(tmp_path: Path) -> None:
    """Everything after `pip install .` (tests/project/test_wheel.py installs a wheel), with
    this install's looop where the command says .venv/bin/looop."""
    install, _, rest = SETUP[0].partition(" && .venv/bin/looop ")
    assert install == "python3 -m venv .venv && .venv/bin/pip install ."
    looop = Path(sys.executable).with_name("looop")
    command = ".venv/bin/looop " + rest
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "looop").symlink_to(looop)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOOP_")}
    env.update(HOME=str(tmp_path), PATH="/usr/bin:/bin")
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "decided" in done.stdout and "last beat" in done.stdout
