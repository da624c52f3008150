"""Benchmark (f): the beat as the work dir grows — goals and sensors (issue #26, item 2).

Times `looop pulse` on an unchanged world (the quiet beat) at 100 / 1,000 / 10,000
goals (8 sensors) and at 8 / 50 / 200 sensors (100 goals), and a full beat
(`looop pulse --force`: SENSE, DIFF, DECIDE with the rules decider, the seal) at
10,000 goals, all interleaved round by round. Prints each median with its ratio to
the quiet 100-goal, 8-sensor beat of the same run, and the full beat's peak RSS
(ru_maxrss of the child, from wait4).

    python bench/scaling.py [RUNS] [LOOOP]

LOOOP: the console script to time (default: the one beside this interpreter), so
one run can time two installs: `python bench/scaling.py 10 /work/main/.venv/bin/looop`.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import add_sensor, cleanup, looop_cmd

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
LOOOP = [sys.argv[2]] if len(sys.argv) > 2 else looop_cmd()
QUIET = [(100, 8), (1000, 8), (10000, 8), (100, 50), (100, 200)]
FULL = (10000, 8)


def workdir(goals: int, sensors: int) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"looop-bench-scale-{goals}g-{sensors}s-")) / "wd"
    subprocess.run([*LOOOP, "init", str(root)], check=True, capture_output=True)  # its own
    for path in [*(root / "sensors").glob("*.sh"), *(root / "goals").glob("*.md")]:
        path.unlink()
    for i in range(sensors):
        add_sensor(root, f"s{i:03}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(goals):
        (root / "goals" / f"goal-{i:05}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    pulse = [*LOOOP, "-C", str(root), "pulse", "-q"]
    subprocess.run(pulse, check=True)  # first beat decides and commits
    check = subprocess.run([*pulse[:-1], "--json"], check=True, capture_output=True, text=True)
    assert '"outcome": "skipped"' in check.stdout, check.stdout
    return root


def timed(argv: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one run of argv."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(argv, stdout=devnull)
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, argv
    return elapsed, usage.ru_maxrss


def main() -> None:
    roots = {shape: workdir(*shape) for shape in QUIET}
    cases: dict[str, list[str]] = {
        f"quiet {g:>5} goals, {s:>3} sensors": [*LOOOP, "-C", str(roots[(g, s)]), "pulse", "-q"]
        for g, s in QUIET
    }
    full = f"full  {FULL[0]:>5} goals, {FULL[1]:>3} sensors"
    cases[full] = [*LOOOP, "-C", str(roots[FULL]), "pulse", "--force", "-q"]
    times: dict[str, list[float]] = {name: [] for name in cases}
    rss: dict[str, list[int]] = {name: [] for name in cases}
    for _ in range(2 + RUNS):  # the first 2 rounds warm the page cache and are dropped
        for name, argv in cases.items():
            elapsed, peak = timed(argv)
            times[name].append(elapsed)
            rss[name].append(peak)
    median = {name: statistics.median(samples[2:]) for name, samples in times.items()}
    base = median[next(iter(cases))]
    print(f"the beat by work-dir size, {RUNS} interleaved runs each ({' '.join(LOOOP)})")
    for name, value in median.items():
        peak = max(rss[name][2:]) / 1024
        print(
            f"  {name}   median {value * 1000:7.1f} ms   × {value / base:.2f}   "
            f"max RSS {peak:5.1f} MiB"
        )
    for root in roots.values():
        cleanup(root)


if __name__ == "__main__":
    main()
