"""The machine fails, not looop: a full disk, a permission denied. Each beat runs as cron
runs it (its own process): a clear error naming the path and what to do, exit 74 (the
environment), no traceback, nothing torn, and the next beat after the fix succeeds."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py.workdir.paths import Paths
from tests.conftest import run_looop, write_sensor

EX_ENVIRONMENT = 74


def _whole(wd: Paths) -> None:
    """Every JSON record the beat left is whole (written entirely or not at all)."""
    for path in wd.state.rglob("*.json"):
        json.loads(path.read_text())


@pytest.mark.parametrize("target", ["events.jsonl", "journal.md"])
def test_a_full_disk_is_named_and_the_next_beat_recovers(wd: Paths, target: str) -> None:
    write_sensor(wd, "s", "echo 1")
    (wd.root / "moves.jsonl").write_text('{"action": "write_playbook", "body": "# p\\n"}\n')
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.jsonl"\n')
    victim = wd.root / target
    victim.unlink(missing_ok=True)
    victim.symlink_to("/dev/full")  # every write to it fails with ENOSPC
    r = run_looop("-C", str(wd.root), "pulse", "--force")
    assert r.returncode == EX_ENVIRONMENT, (r.returncode, r.stderr)
    assert "No space left on device" in r.stderr and target in r.stderr
    assert "disk is full" in r.stderr and "Traceback" not in r.stderr
    assert "internal error" not in r.stderr
    assert not wd.error_log.exists() or "Traceback" not in wd.error_log.read_text()
    _whole(wd)
    victim.unlink()  # space is back
    again = run_looop("-C", str(wd.root), "pulse", "--force")
    assert again.returncode == 0, again.stderr
    _whole(wd)


@pytest.fixture
def shared_wd() -> Iterator[Path]:
    """A work dir other users can read (pytest's tmp dirs are private to their owner)."""
    base = Path(tempfile.mkdtemp(prefix="looop-fault-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_permission_denied_is_named_and_the_next_beat_recovers(shared_wd: Path) -> None:
    root = shared_wd / "wd"
    done = run_looop("init", str(root))
    assert done.returncode == 0, done.stderr
    (root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
    for script in (root / "sensors").glob("*.sh"):
        script.unlink()
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    (root / "state").chmod(0o555)
    cmd = [sys.executable, "-m", "looop_py", "-C", str(root), "pulse", "--force"]
    if os.geteuid() == 0 and shutil.which("setpriv"):  # root writes anything: drop that power
        drop = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", *cmd]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    (root / "state").chmod(0o755)
    assert r.returncode == EX_ENVIRONMENT, (r.returncode, r.stderr)
    assert "Permission denied" in r.stderr and str(root) in r.stderr
    assert "write access" in r.stderr and "Traceback" not in r.stderr
    again = run_looop("-C", str(root), "pulse", "--force")  # as the owner
    assert again.returncode == 0, again.stderr
