"""Shared helpers for the benchmark scripts (not part of the package)."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Work in play for the quiet-beat benchmarks (quiet_in_play.py, etcd_beat.py): a worker
# whose output churns, and a loop whose maker runs while its work dir is there.
WORKER = "while :; do date +%N; sleep 0.1; done"  # a worker whose output churns
LOOP = """---
intent: sweep the floor
level: L1-report
runtime: shell
on: [s1]
maker: 'while [ -d {root} ]; do date +%N; sleep 0.1; done'
checker: 'true'
---
# sweep
"""


def looop_cmd() -> list[str]:
    """The installed console script beside this interpreter, else `python -m looop_py`."""
    beside = Path(sys.executable).with_name("looop")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "looop_py"]


def fresh_workdir(prefix: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"looop-bench-{prefix}-")) / "wd"
    subprocess.run([*looop_cmd(), "init", str(root)], check=True, capture_output=True)
    for script in (root / "sensors").glob("*.sh"):
        script.unlink()
    for goal in (root / "goals").glob("*.md"):
        goal.unlink()
    return root


def add_sensor(root: Path, name: str, body: str) -> None:
    path = root / "sensors" / f"{name}.sh"
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(0o755)


def time_runs(argv: list[str], runs: int, *, cwd: Path | None = None) -> list[float]:
    """Wall-clock seconds of `runs` sequential runs of argv."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, cwd=cwd, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return samples


def summary(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return f"median {statistics.median(ms):7.1f} ms   min {ms[0]:7.1f} ms   p90 {p90:7.1f} ms"


def cleanup(root: Path) -> None:
    if os.environ.get("LOOOP_BENCH_KEEP"):
        print(f"(kept {root})")
        return
    shutil.rmtree(root.parent, ignore_errors=True)
