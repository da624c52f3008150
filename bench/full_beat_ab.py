"""The full beat at 10,000 goals, two installs side by side (issue #26's full-beat target).

    python bench/full_beat_ab.py RUNS VENV_A VENV_B

VENV_A and VENV_B are throwaway venvs, each with a wheel install of looop (e.g. main and
a branch, or a release and main). Per install, work dirs as bench/scaling.py builds them
(8 sensors, one-line goals, the default rules decider):
  quiet100   `looop pulse -q` at 100 goals, sealed (the base of every ratio)
  full100    `looop pulse --force -q` at 100 goals (the full beat's fixed cost)
  quiet10k   `looop pulse -q` at 10,000 goals, sealed
  full10k    `looop pulse --force -q` at 10,000 goals
  full10k1   the same, with one goal rewritten before each beat (not timed): goals/ is not
             as the last beat listed it, so its goal side is worked out again
Each round runs every case of both installs once, the order reversed every other round;
2 warm-up rounds are dropped. Prints per install and case the median wall ms, median CPU
ms (user+sys of the child, from wait4) and max RSS, and the ratios to quiet100 of the
same install: CPU holds on a loaded machine where wall time does not.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import cleanup

RUNS = int(sys.argv[1])
VENVS = {"A": Path(sys.argv[2]), "B": Path(sys.argv[3])}
SENSOR = '#!/usr/bin/env bash\necho \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'\n'


def workdir(venv: Path, tag: str, goals: int) -> Path:
    looop = str(venv / "bin" / "looop")
    root = Path(tempfile.mkdtemp(prefix=f"looop-bench-full-{tag}-")) / "wd"
    subprocess.run([looop, "init", str(root)], check=True, capture_output=True)
    for path in [*(root / "sensors").glob("*.sh"), *(root / "goals").glob("*.md")]:
        path.unlink()
    for i in range(8):
        script = root / "sensors" / f"s{i}.sh"
        script.write_text(SENSOR.format(i=i))
        script.chmod(0o755)
    for i in range(goals):
        (root / "goals" / f"goal-{i:05}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    subprocess.run([looop, "-C", str(root), "pulse", "-q", "--force"], check=True)
    for _ in range(2):
        subprocess.run([looop, "-C", str(root), "pulse", "-q"], check=True)
    return root


def edit_one(root: Path, n: int) -> None:
    """Rewrite one goal (another text each round): the next beat lists goals/ changed."""
    (root / "goals" / "goal-04242.md").write_text(f"# Goal 4242\n\nKeep thing {n} tidy.\n")


def timed(argv: list[str]) -> tuple[float, float, float]:
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(argv, stdout=devnull)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    assert os.waitstatus_to_exitcode(status) == 0, argv
    return wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000, usage.ru_maxrss / 1024


CASES = {  # goals, pulse args
    "quiet100": (100, ()),
    "full100": (100, ("--force",)),
    "quiet10k": (10000, ()),
    "full10k": (10000, ("--force",)),
    "full10k1": (10000, ("--force",)),
}
PREP = {"full10k1": edit_one}  # run before each timed beat of that case


def main() -> None:
    dirs = {
        (v, c): workdir(venv, f"{v}-{c}", n)
        for v, venv in VENVS.items()
        for c, (n, _) in CASES.items()
    }
    try:
        samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {k: [] for k in dirs}
        loads = []
        for n in range(2 + RUNS):
            loads.append(os.getloadavg()[0])
            order = list(dirs.items()) if n % 2 else list(reversed(dirs.items()))
            for key, root in order:
                if key[1] in PREP:
                    PREP[key[1]](root, n)
                looop = str(VENVS[key[0]] / "bin" / "looop")
                argv = [looop, "-C", str(root), "pulse", "-q", *CASES[key[1]][1]]
                samples[key].append(timed(argv))
        med = {
            k: tuple(statistics.median(x[i] for x in s[2:]) for i in range(3))
            for k, s in samples.items()
        }
        print(f"{RUNS} interleaved rounds; load average {min(loads):.1f}-{max(loads):.1f}")
        for v, venv in VENVS.items():
            print(f"{v} = {venv}")
            base = med[(v, "quiet100")]
            for c in CASES:
                w, cpu, rss = med[(v, c)]
                print(
                    f"  {c:<9} wall {w:7.1f} ms (x{w / base[0]:.2f})   cpu {cpu:7.1f} ms"
                    f" (x{cpu / base[1]:.2f})   maxrss {rss:5.1f} MiB"
                )
    finally:
        for root in dirs.values():
            cleanup(root)


if __name__ == "__main__":
    main()
