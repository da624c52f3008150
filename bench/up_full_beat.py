"""Benchmark: `looop up`'s FULL beat at 10,000 goals, against its sealed 100-goal quiet beat.

Under `looop up` (ops/resident.py) a beat that finds a change runs in full. Per install
under test, three resident drivers (processes that open the work dir once, as `looop up`
does, and run one `resident.up_beat` with its goals watch per line on stdin, answering
with the beat's wall time, its CPU time (user+sys of the driver and of the sensors it
ran, from getrusage), its outcome and how many times the watch listed goals/):
  up100      100 goals, nothing changes: the sealed quiet beat (the base of every ratio)
  signal10k  10,000 goals, one sensor's signal changes before each beat (not timed): the
             quiet attempt finds it and hands over to the full beat
  edit10k    10,000 goals, one goal rewritten in place before each beat (not timed): the
             watch saw goals/ change, the full beat runs at once
  save10k    the same, the goal saved as editors do (a new file renamed over it): goals/
             itself changed just before the beat lists it
  edit10k+q, save10k+q   the quiet beat right after each of those, on the same driver (on
             main the watch lists goals/ there again: the full beat had listed it itself)
8 sensors (bash), one-line goals, the default rules decider. Each round runs every case
of every install once, the order reversed every other round; 2 warm-up rounds dropped.

    python bench/up_full_beat.py ROUNDS PYTHON [PYTHON ...]

PYTHON: the interpreter of each install, e.g. wheel installs of main and of a branch.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import add_sensor, cleanup

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
PYTHONS = sys.argv[2:] or [sys.executable]
SENSORS = 8

DRIVER = """
import json, resource, sys
from pathlib import Path
import time
from looop_py.coord.choose import Reopening
from looop_py.ops.goalwatch import GoalWatch
from looop_py.ops.resident import up_beat
from looop_py.workdir.paths import Paths
opened = Reopening(Paths(Path(sys.argv[1])))
watch = GoalWatch(str(opened.paths.goals))
def cpu():
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
for _ in sys.stdin:
    wd = opened.current()
    listings = watch.listings
    c0, t0 = cpu(), time.perf_counter()
    result = up_beat(wd, watch)
    t1, c1 = time.perf_counter(), cpu()
    out = [t1 - t0, c1 - c0, str(result.outcome), watch.listings - listings]
    print(json.dumps(out), flush=True)
"""


def workdir(python: str, goals: int, tag: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"looop-bench-upfull-{tag}-")) / "wd"
    looop = [python, "-m", "looop_py"]
    subprocess.run([*looop, "init", str(root)], check=True, capture_output=True)
    for path in [*(root / "sensors").glob("*.sh"), *(root / "goals").glob("*.md")]:
        path.unlink()
    (root / "value").write_text("0\n")
    add_sensor(root, "s000", 'echo "{\\"signal\\": {\\"n\\": $(cat value)}, \\"detail\\": {}}"')
    for i in range(1, SENSORS):
        add_sensor(root, f"s{i:03}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(goals):
        (root / "goals" / f"goal-{i:05}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    subprocess.run([*looop, "-C", str(root), "pulse", "-q", "--force"], check=True)
    return root


def new_signal(root: Path, n: int) -> None:
    (root / "value").write_text(f"{n + 1}\n")


def edit_goal(root: Path, n: int) -> None:
    (root / "goals" / "goal-04242.md").write_text(f"# Goal 4242\n\nKeep thing {n} tidy.\n")


def save_goal(root: Path, n: int) -> None:
    new = root / "goals" / ".goal-04242.md.swp"
    new.write_text(f"# Goal 4242\n\nKeep thing {n} tidy.\n")
    os.rename(new, root / "goals" / "goal-04242.md")


CASES = {
    "up100": (100, None),
    "signal10k": (10_000, new_signal),
    "edit10k": (10_000, edit_goal),
    "save10k": (10_000, save_goal),
}
THEN_QUIET = ("edit10k", "save10k")


class Resident:
    def __init__(self, python: str, root: Path) -> None:
        self.root = root
        self.proc = subprocess.Popen(
            [python, "-c", DRIVER, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def beat(self) -> tuple[float, float, str, int]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("beat\n")
        self.proc.stdin.flush()
        wall, cpu, outcome, listings = json.loads(self.proc.stdout.readline())
        return wall * 1000, cpu * 1000, outcome, listings

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main() -> None:
    drivers = {
        (n, case): Resident(python, workdir(python, goals, f"{n}-{case}"))
        for n, python in enumerate(PYTHONS)
        for case, (goals, _) in CASES.items()
    }
    samples: dict[tuple[int, str], list[tuple[float, float, str, int]]] = {
        (n, case): []
        for n in range(len(PYTHONS))
        for case in (*CASES, *(f"{c}+q" for c in THEN_QUIET))
    }
    loads = []
    try:
        for r in range(2 + ROUNDS):
            loads.append(os.getloadavg()[0])
            order = list(drivers.items()) if r % 2 else list(reversed(drivers.items()))
            for key, driver in order:
                prep = CASES[key[1]][1]
                if prep is not None:
                    prep(driver.root, r)
                samples[key].append(driver.beat())
                if key[1] in THEN_QUIET:
                    samples[(key[0], f"{key[1]}+q")].append(driver.beat())
    finally:
        for driver in drivers.values():
            driver.close()
            cleanup(driver.root)
    print(
        f"`looop up` full beat, {ROUNDS} interleaved rounds, load {min(loads):.1f}-{max(loads):.1f}"
    )
    for n, python in enumerate(PYTHONS):
        print(f"[{n}] {python}")
        base = [statistics.median(s[i] for s in samples[(n, "up100")][2:]) for i in (0, 1)]
        for case in (*CASES, *(f"{c}+q" for c in THEN_QUIET)):
            got = samples[(n, case)][2:]
            wall, cpu = (statistics.median(s[i] for s in got) for i in (0, 1))
            outcomes = sorted({s[2] for s in got})
            listings = sorted({s[3] for s in got})
            print(
                f"  {case:<10} wall {wall:7.1f} ms (x{wall / base[0]:.2f})"
                f"  cpu {cpu:7.1f} ms (x{cpu / base[1]:.2f})"
                f"  outcomes {outcomes}  watch listings per beat {listings}"
            )


if __name__ == "__main__":
    main()
