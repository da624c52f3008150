from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init


def write_sensor(paths: Paths, name: str, body: str, *, mode: int = 0o755) -> Path:
    """A sensor script; `body` is bash unless it starts with its own #! line."""
    path = paths.sensors / f"{name}.sh"
    text = body if body.startswith("#!") else "#!/usr/bin/env bash\n" + body
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def wd(tmp_path: Path) -> Paths:
    """A fresh work dir with the starter files, no starter sensors, the noop decider."""
    result = init(tmp_path / "wd")
    for script in (result.root / "sensors").glob("*.sh"):
        script.unlink()
    # The foundation tests watch sensing and hashing; deciding is tested on its own.
    (result.root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
    return Paths(result.root)


def run_looop(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a child process, as cron or a user would."""
    full_env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "looop_py", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


def wait_for(predicate: Callable[[], object], timeout: float = 10.0, what: str = "it") -> None:
    """Poll until `predicate()` is truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)
