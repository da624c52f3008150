"""Benchmark (a): the quiet beat — 8 trivial sensors, 100 goals, world unchanged.

Reports the wall time of `looop pulse` on an unchanged world beside a plain bash
loop that runs the same 8 sensors one after another and hashes their output, and
beside bench/floor.py (posix_spawn + xxh3: the least a Python program can do; and
`floor.py --lean`, which like looop execs a `#!/usr/bin/env NAME` sensor's NAME at once
and skips the interpreter's teardown), and
beside the same beat started through the console-script wrapper pip 23 writes (it
imports `re`) instead of the launcher looop ships, and beside `python -c pass` and
`python -S -c pass` (start-up with and without `site`), and beside the bash loop running
each sensor as `bash "$s"` (no env process: what looop and the lean floor do).
The commands run interleaved, one round after another, so a loaded machine
slows them alike and the ratios hold. Each is timed twice: wall time, and the CPU
time (user + sys) of the process and the children it waited for, from wait4: on a
loaded machine the CPU time is the steadier figure.

    python bench/quiet_beat.py [RUNS [OTHER_LOOOP]]

OTHER_LOOOP: another install's `looop` (say main's, for a before/after in one run),
timed beside this interpreter's on a sealed work dir of its own.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd

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


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and the children it reaped)."""
    out = os.open(os.devnull, os.O_WRONLY)
    start = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, out, 1)])
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    os.close(out)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    other_looop = sys.argv[2] if len(sys.argv) > 2 else None
    root, pulse = sealed_workdir(looop_cmd())
    # The seal covers how looop was started (argv[0]), so the wrapper gets its own work dir.
    wrapper = root.parent / "looop-pip23"
    wrapper.write_text(PIP23_WRAPPER.format(python=sys.executable))
    wrapper.chmod(0o755)
    other, wrapped = sealed_workdir([str(wrapper)])
    dirs = [root, other]

    floor = str(Path(__file__).with_name("floor.py"))
    bash_loop = f'cd "{root}" && for s in sensors/*.sh; do "$s"; done | sha256sum >/dev/null'
    commands = {"looop pulse (skipped)": pulse}
    if other_looop:
        third, commands["… OTHER_LOOOP's"] = sealed_workdir([other_looop])
        dirs.append(third)
    commands |= {
        "… through pip 23's wrapper": wrapped,
        "bash loop, serial + sha256": ["bash", "-c", bash_loop],
        "bash loop, bash $s (no env)": ["bash", "-c", bash_loop.replace('"$s"', 'bash "$s"')],
        "floor: posix_spawn + xxh3": [sys.executable, floor, str(root)],
        "floor --lean (no env, _exit)": [sys.executable, floor, "--lean", str(root)],
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -S -c pass": [sys.executable, "-S", "-c", "pass"],
    }
    wall: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(3 + runs):  # the first 3 rounds warm the page cache and are dropped
        for name, argv in commands.items():
            w, c = timed(argv)
            if i >= 3:
                wall[name].append(w * 1000)
                cpu[name].append(c * 1000)
    load = os.getloadavg()[0]
    print(f"quiet beat, 8 sensors + 100 goals, {runs} interleaved runs each, load {load:.2f}")
    heads = ("wall median", "÷ bash", "÷ floor", "cpu median", "÷ bash", "÷ floor")
    print(f"  {'':28} {heads[0]:>11} {heads[1]:>7} {heads[2]:>7}", end="")
    print(f" {heads[3]:>11} {heads[4]:>7} {heads[5]:>7}")
    bash = "bash loop, serial + sha256"
    floor_name = "floor: posix_spawn + xxh3"
    bash_w, bash_c = statistics.median(wall[bash]), statistics.median(cpu[bash])
    floor_w, floor_c = statistics.median(wall[floor_name]), statistics.median(cpu[floor_name])
    for name in commands:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(
            f"  {name:28} {w:8.1f} ms {w / bash_w:7.2f} {w / floor_w:7.2f}"
            f" {c:8.1f} ms {c / bash_c:7.2f} {c / floor_c:7.2f}"
        )
    for folder in dirs:
        cleanup(folder)


if __name__ == "__main__":
    main()
