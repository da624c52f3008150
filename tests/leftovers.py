"""No process a test started may outlive the test session.

A test that starts a worker, a sensor or a server and forgets it leaves it running after
the suite has passed: b8480e7 found 56 processes still looping from earlier runs, each
taking CPU from every later run and benchmark on the machine. Nothing in a test's own
assertions sees that, so the session checks it at its end: any process whose working
directory or command line is inside this session's temporary folder is a leftover.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil


def _ancestors() -> set[int]:
    pids, proc = set(), psutil.Process()
    while proc is not None:
        pids.add(proc.pid)
        proc = proc.parent()
    return pids


def leftovers(base: Path) -> list[psutil.Process]:
    """Live processes (not this one, its parents, or zombies) working inside `base`."""
    inside = f"{base}{os.sep}"
    mine, found = _ancestors(), []
    for proc in psutil.process_iter(["pid", "cwd", "cmdline", "status"]):
        info = proc.info
        if info["pid"] in mine or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        places = [info["cwd"] or "", *(info["cmdline"] or ())]
        if any(f"{place}{os.sep}".startswith(inside) or inside in place for place in places):
            found.append(proc)
    return found


def reap(base: Path, *, grace_s: float) -> list[str]:
    """Wait up to `grace_s` for leftovers to end by themselves, then kill the rest.

    Returns a line per process that had to be killed (pid, working dir, command line).
    """
    deadline = time.monotonic() + grace_s
    while (found := leftovers(base)) and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = []
    for proc in found:
        try:
            lines.append(f"{proc.pid} in {proc.cwd()}: {' '.join(proc.cmdline())[:200]}")
            proc.kill()
        except psutil.Error:  # it ended on its own between the listing and the kill
            continue
    psutil.wait_procs(found, timeout=5)
    return lines
