"""A normal (non-editable) install carries the starter files: build, install, init."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_install_can_init_and_pulse(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("looop_py-*.whl"))
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    # Tests need no network, so the dependencies come from this environment's
    # site-packages through a plain path entry (its .pth files, among them the
    # editable hook, are not processed); looop itself comes from the wheel.
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([str(py), "-c", purelib], check=True, capture_output=True, text=True)
    site_dir = Path(site.stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site_dir / "_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    subprocess.run(
        [str(py), "-m", "pip", "install", "--no-deps", "-q", str(wheel)],
        check=True,
        capture_output=True,
    )
    where = subprocess.run(
        [str(py), "-c", "import looop_py, sys; print(looop_py.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    assert str(env_dir) in where and str(ROOT) not in where
    looop = env_dir / "bin" / "looop"
    work = tmp_path / "ops"
    init = subprocess.run(
        [str(looop), "init", str(work)], capture_output=True, text=True, cwd=tmp_path
    )
    assert init.returncode == 0, init.stderr
    assert (work / "sensors" / "date.sh").stat().st_mode & 0o111
    pulse = subprocess.run(
        [str(looop), "-C", str(work), "pulse", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert pulse.returncode == 0, pulse.stderr
    assert '"outcome": "decided"' in pulse.stdout
    # The reference pages ship inside the wheel: `looop help TOPIC` prints each one.
    for topic in ("sensors", "configuration", "cli"):
        page = subprocess.run(
            [str(looop), "help", topic], capture_output=True, text=True, cwd=tmp_path
        )
        assert page.returncode == 0 and page.stdout.startswith("# "), page.stderr

    # The installed `looop` is the lean launcher: a quiet beat through it never imports
    # `re` (the console-script wrapper pip < 24 writes imports it before looop starts).
    assert "import re" not in looop.read_text()
    for script in (work / "sensors").glob("*.sh"):
        script.unlink()
    steady = work / "sensors" / "steady.sh"
    steady.write_text('#!/bin/sh\necho \'{"signal": {"n": 1}}\'\n')
    steady.chmod(0o755)
    timed = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}  # the seal covers env names
    quiet = [str(looop), "-C", str(work), "pulse", "-q"]
    loaded: set[str] = set()

    def a_quiet_beat() -> bool:  # the starter work its first beat decided must settle first
        nonlocal loaded
        done = subprocess.run(quiet, capture_output=True, text=True, env=timed, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        rows = [line.rsplit("|", 1) for line in done.stderr.splitlines()]
        loaded = {row[1].strip() for row in rows if len(row) == 2}
        return "looop_py.beat.quiet" in loaded and "looop_py.cli.pulse" not in loaded

    wait_for(a_quiet_beat, timeout=60, what=lambda: sorted(loaded))
    assert "re" not in loaded, sorted(loaded)
