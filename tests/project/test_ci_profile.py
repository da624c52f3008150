"""CI runs the property tests on fixed examples (tests/conftest.py says why)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
from hypothesis import given, settings, strategies as st
seen = []
@given(st.integers())
def probe(n):
    seen.append(n)
def test_probe():
    probe()
    print("SEEN", settings.default.derandomize, settings.default.database, hash(tuple(seen)))
"""


def _examples(tmp_path: Path, ci: bool) -> str:
    """The probe's line, run in a fresh pytest beside a copy of our conftest."""
    tmp_path.mkdir()
    test = tmp_path / "test_probe.py"
    test.write_text(PROBE)
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            str(test),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("SEEN")), None)
    assert line is not None, out.stdout + out.stderr
    return line


def test_ci_checks_the_same_examples_every_run(tmp_path: Path) -> None:
    first, second = _examples(tmp_path / "a", ci=True), _examples(tmp_path / "b", ci=True)
    assert first.startswith("SEEN True None"), first
    assert first == second


def test_elsewhere_the_examples_are_explored_afresh(tmp_path: Path) -> None:
    assert _examples(tmp_path / "a", ci=False).startswith("SEEN False")
