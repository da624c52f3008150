"""A pytest session of its own on one test file, beside a copy of tests/conftest.py: for the
tests of what that conftest does to a whole session (tests/project)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_session(
    folder: Path, source: str, env: Mapping[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """Write `source` as folder/test_inner.py and run pytest on it there (no xdist, no cache),
    with `env` (this repo on PYTHONPATH) and `args`."""
    folder.mkdir(exist_ok=True)
    test = folder / "test_inner.py"
    test.write_text(source)
    (folder / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    return subprocess.run(
        [*argv, *args, str(test)],
        cwd=folder,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def without(*names: str) -> dict[str, str]:
    """This process's environment less `names`."""
    return {k: v for k, v in os.environ.items() if k not in names}
