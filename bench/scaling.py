"""Benchmark (f): the quiet beat as the work dir grows — goals and sensors.

Times `looop pulse` on an unchanged world at 100 / 1,000 / 5,000 goals (8
sensors) and at 8 / 50 / 200 sensors (100 goals), interleaved round by round,
and prints each median with its ratio to the 100-goal, 8-sensor beat.

    python bench/scaling.py [RUNS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
SHAPES = [(100, 8), (1000, 8), (5000, 8), (100, 50), (100, 200)]


def workdir(goals: int, sensors: int) -> Path:
    root = fresh_workdir(f"scale-{goals}g-{sensors}s")
    for i in range(sensors):
        add_sensor(root, f"s{i:03}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(goals):
        (root / "goals" / f"goal-{i:04}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    pulse = [*looop_cmd(), "-C", str(root), "pulse", "-q"]
    subprocess.run(pulse, check=True)  # first beat decides and commits
    check = subprocess.run([*pulse[:-1], "--json"], check=True, capture_output=True, text=True)
    assert '"outcome": "skipped"' in check.stdout, check.stdout
    return root


def main() -> None:
    roots = {shape: workdir(*shape) for shape in SHAPES}
    times: dict[tuple[int, int], list[float]] = {shape: [] for shape in SHAPES}
    for _ in range(2 + RUNS):  # the first 2 rounds warm the page cache and are dropped
        for shape, root in roots.items():
            argv = [*looop_cmd(), "-C", str(root), "pulse", "-q"]
            start = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times[shape].append(time.perf_counter() - start)
    median = {shape: statistics.median(samples[2:]) for shape, samples in times.items()}
    base = median[SHAPES[0]]
    print(f"quiet beat by work-dir size, {RUNS} interleaved runs each")
    for (goals, sensors), value in median.items():
        label = f"{goals:>5} goals, {sensors:>3} sensors"
        print(f"  {label}   median {value * 1000:7.1f} ms   × {value / base:.2f}")
    for root in roots.values():
        cleanup(root)


if __name__ == "__main__":
    main()
