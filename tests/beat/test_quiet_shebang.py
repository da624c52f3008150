"""The quiet beat execs each `#!/usr/bin/env bash` sensor's bash at once (shebang.py), and
still sees what env would have seen: the NAME on PATH is looked up on every beat, never
taken from the seal. Counted: a sealed quiet beat execs the sensors and nothing else
between them and looop (strace)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from looop_py.workdir.paths import Paths
from tests.base.test_shebang import STRACE, execs_done
from tests.beat.test_quiet import _last_beat, _pulse, _sensed_hash
from tests.conftest import write_sensor

BASH = shutil.which("bash")


def test_a_bash_new_on_path_breaks_the_seal_though_path_held(wd: Paths, tmp_path: Path) -> None:
    """PATH is the same string, so the seal's environment key holds; a `bash` put in one of
    its folders since is what env would now run, and so is what the quiet beat runs."""
    tools = tmp_path / "tools"
    tools.mkdir()
    env = {"PATH": f"{tools}:{os.environ['PATH']}"}
    write_sensor(wd, "steady", 'echo \'{"signal": "real"}\'')
    assert _pulse(wd, "--force", env=env)["outcome"] == "decided"
    assert _pulse(wd, env=env).get("sealed") is True
    shadow = tools / "bash"
    shadow.write_text(f'#!{BASH}\necho \'{{"signal": "shadow"}}\'\n')
    shadow.chmod(0o755)
    beat = _pulse(wd, env=env)
    assert not beat.get("sealed"), "the seal vouched for a sensor another bash now runs"
    assert beat["world_hash"] == _sensed_hash(wd, env=env)
    assert "shadow" in (wd.snapshots / "sensor-steady.json").read_text()
    assert _pulse(wd, env=env).get("sealed") is True  # and it seals what it now sees


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace counts the execve calls")
def test_a_sealed_quiet_beat_execs_each_sensors_bash_and_nothing_else(
    wd: Paths, tmp_path: Path
) -> None:
    for i in range(3):
        write_sensor(wd, f"s{i}", f"echo '{{\"signal\": {i}}}'")
    pulse = [sys.executable, "-m", "looop_py", "-C", str(wd.root), "pulse", "-q"]
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    logs = tmp_path / "strace"
    logs.mkdir()
    traced = [*STRACE, "-o", str(logs / "pid"), *pulse]
    for argv in (pulse, pulse, traced):  # the full beat, one to seal, the counted one
        subprocess.run(argv, env=env, check=True, timeout=120)
    assert _last_beat(wd).get("sealed") is True
    execs = execs_done(logs)
    assert execs.pop(sys.executable) == 1  # looop itself
    assert execs == {BASH: 3}, execs  # before: each sensor's script, then env's bash
