"""The session's guard against processes a test forgets (tests/leftovers.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests import inner, leftovers


def _sleeper(cwd: Path) -> subprocess.Popen[bytes]:
    # setsid: a detached worker, as looop starts them; its parent is not the test.
    return subprocess.Popen(["setsid", "sleep", "600"], cwd=cwd)


def test_a_process_working_inside_the_folder_is_found_and_killed(tmp_path: Path) -> None:
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    left, other = _sleeper(inside), _sleeper(outside)
    try:
        assert [p.pid for p in leftovers.leftovers(inside)] == [left.pid]
        killed = leftovers.reap(inside, grace_s=0.2)
        assert len(killed) == 1 and killed[0].startswith(f"{left.pid} in {inside}")
        assert leftovers.leftovers(inside) == []  # killed and reaped (reap waits for it)
        assert other.poll() is None, "a process outside the folder was killed"
    finally:
        other.kill()
        other.wait()
        left.kill()
        left.wait()


def test_a_folder_named_in_the_command_line_counts_and_a_prefix_does_not(tmp_path: Path) -> None:
    (tmp_path / "wd").mkdir()
    (tmp_path / "wd2").mkdir()
    # the folder only in the arguments, as a sensor's path is
    named = subprocess.Popen(["sh", "-c", "sleep 600", "sh", str(tmp_path / "wd" / "sensors")])
    prefix = subprocess.Popen(["sleep", "600"], cwd=tmp_path / "wd2")
    try:
        assert [p.pid for p in leftovers.leftovers(tmp_path / "wd")] == [named.pid]
    finally:
        for proc in (named, prefix):
            proc.kill()
            proc.wait()


def test_a_process_that_ends_within_the_grace_is_not_reported(tmp_path: Path) -> None:
    quick = subprocess.Popen(["sleep", "0.3"], cwd=tmp_path)
    assert leftovers.reap(tmp_path, grace_s=10.0) == []
    assert quick.wait(timeout=5) == 0


LEAKY = """
import subprocess

def test_leaky(tmp_path):
    subprocess.Popen(["setsid", "sleep", "600"], cwd=tmp_path)

def test_tidy(tmp_path):
    subprocess.run(["true"], cwd=tmp_path, check=True)
"""


def test_the_audit_names_the_test_that_left_a_process(tmp_path: Path) -> None:
    """LOOOP_TEST_LEAKS=1 checks after each test (tests/conftest.py), not only at the end."""
    env = {**os.environ, "LOOOP_TEST_LEAKS": "1"}
    out = inner.run_session(tmp_path, LEAKY, env, "--basetemp", str(tmp_path / "base"))
    assert "ERROR at teardown of test_leaky" in out.stdout, out.stdout
    assert "of test_tidy" not in out.stdout  # the session's guard would blame the last test
    assert "sleep 600" in out.stdout
    assert leftovers.leftovers(tmp_path / "base") == []  # killed by the audit
