"""CI runs the property tests on fixed examples (tests/conftest.py says why)."""

from __future__ import annotations

from pathlib import Path

from tests import inner

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


def _examples(folder: Path, ci: bool) -> str:
    """The probe's line, from a pytest session of its own beside a copy of our conftest."""
    env = inner.without("CI")
    if ci:
        env["CI"] = "true"
    out = inner.run_session(folder, PROBE, env, "-s")
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("SEEN")), None)
    assert line is not None, out.stdout + out.stderr
    return line


def test_ci_checks_the_same_examples_every_run(tmp_path: Path) -> None:
    first, second = _examples(tmp_path / "a", ci=True), _examples(tmp_path / "b", ci=True)
    assert first.startswith("SEEN True None"), first
    assert first == second


def test_elsewhere_the_examples_are_explored_afresh(tmp_path: Path) -> None:
    assert _examples(tmp_path / "a", ci=False).startswith("SEEN False")
