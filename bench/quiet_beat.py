"""Benchmark (a): the quiet beat — 8 trivial sensors, 100 goals, world unchanged.

Reports the wall time of `looop pulse` on an unchanged world beside a plain bash
loop that runs the same 8 sensors one after another and hashes their output, and
beside bench/floor.py (posix_spawn + xxh3: the least a Python program can do), and
beside the same beat started through the console-script wrapper pip 23 writes (it
imports `re`) instead of the launcher looop ships.
The commands run interleaved, one round after another, so a loaded machine
slows them alike and the ratios hold.

    python bench/quiet_beat.py [RUNS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


# The console-script wrapper pip 23 writes for an entry point (distlib's template), for a
# same-run comparison with the launcher looop ships (looop_py/looop).
PIP23_WRAPPER = """#!{python}
# -*- coding: utf-8 -*-
import re
import sys
from looop_py.console import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def sealed_workdir(launcher: list[str]) -> tuple[Path, list[str]]:
    """A work dir with 8 sensors and 100 goals, sealed by a first beat; its quiet pulse."""
    root = fresh_workdir("quiet")
    for i in range(8):
        add_sensor(root, f"s{i}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(100):
        (root / "goals" / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    pulse = [*launcher, "-C", str(root), "pulse", "-q"]
    subprocess.run(pulse, check=True)  # first beat decides and commits
    check = subprocess.run([*pulse[:-1], "--json"], check=True, capture_output=True, text=True)
    assert '"outcome": "skipped"' in check.stdout, check.stdout
    return root, pulse


def main() -> None:
    root, pulse = sealed_workdir(looop_cmd())
    # The seal covers how looop was started (argv[0]), so the wrapper gets its own work dir.
    wrapper = root.parent / "looop-pip23"
    wrapper.write_text(PIP23_WRAPPER.format(python=sys.executable))
    wrapper.chmod(0o755)
    other, wrapped = sealed_workdir([str(wrapper)])

    floor = str(Path(__file__).with_name("floor.py"))
    bash_loop = f'cd "{root}" && for s in sensors/*.sh; do "$s"; done | sha256sum >/dev/null'
    commands = {
        "looop pulse (skipped)": pulse,
        "… through pip 23's wrapper": wrapped,
        "bash loop, serial + sha256": ["bash", "-c", bash_loop],
        "floor: posix_spawn + xxh3": [sys.executable, floor, str(root)],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(3 + RUNS):  # the first 3 rounds warm the page cache and are dropped
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(samples[3:]) for name, samples in times.items()}
    print(f"quiet beat, 8 sensors + 100 goals, {RUNS} interleaved runs each")
    for name, samples in times.items():
        ms = sorted(s * 1000 for s in samples[3:])
        print(f"  {name:28} median {median[name] * 1000:7.1f} ms   min {ms[0]:7.1f} ms")
    looop = median["looop pulse (skipped)"]
    bash = median["bash loop, serial + sha256"]
    floor_s = median["floor: posix_spawn + xxh3"]
    print(f"  looop / bash {looop / bash:.2f}   floor / bash {floor_s / bash:.2f}", end="")
    print(f"   looop / floor {looop / floor_s:.2f}")
    old = median["… through pip 23's wrapper"]
    print(f"  wrapper / bash {old / bash:.2f}   looop / wrapper {looop / old:.2f}")
    cleanup(root)
    cleanup(other)


if __name__ == "__main__":
    main()
