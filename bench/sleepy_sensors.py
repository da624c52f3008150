"""Benchmark (b): 16 sensors that each sleep 0.5 s — concurrency, not 8 s of waiting.

python bench/sleepy_sensors.py [RUNS]
"""

from __future__ import annotations

import sys

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd, summary, time_runs

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 5


def main() -> None:
    root = fresh_workdir("sleepy")
    (root / "looop.toml").write_text("[sensors]\nconcurrency = 16\n")
    for i in range(16):
        add_sensor(root, f"nap{i}", "sleep 0.5; echo rested")
    pulse = [*looop_cmd(), "-C", str(root), "pulse", "-q"]
    samples = time_runs(pulse, RUNS)
    print(f"16 sensors × sleep 0.5 s (serial would be 8 s), {RUNS} beats")
    print(f"  looop pulse                  {summary(samples)}")
    cleanup(root)


if __name__ == "__main__":
    main()
