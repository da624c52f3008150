"""Benchmark: `looop up`'s quiet beat at 100 and 10,000 goals, beside the cron quiet beat.

`looop up` beats in one long-lived process (ops/resident.py). Each install under test
gets, per size (8 sensors; 100 and 10,000 one-line goals), a resident driver: a process
that opens the work dir once, as `looop up` does, and runs one beat of `up` per line on
its stdin (`resident.up_beat` with its goals watch, or `beat()` on an install without
it, as its `up` did), answering with the beat's wall time and CPU time (user+sys of the
driver and of the sensors it ran, from getrusage). Beside them, per size, the cron quiet
beat: `looop pulse -q` as a new process on a work dir of its own (wall, and user+sys
of the child from wait4). All cases take turns, round by round; 2 warm-up rounds are
dropped. The floor for the cron beat at 10,000 goals: listing goals/ and one lstat per
goal (what its survey must do), timed in this process, same run.

    python bench/up_scaling.py [ROUNDS] [PYTHON ...]

PYTHON: the interpreter of each install to compare (default: this one), e.g. a wheel
install of main and of a branch, each in its own throwaway venv.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import add_sensor, cleanup

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
PYTHONS = sys.argv[2:] or [sys.executable]
SIZES = (100, 10_000)
SENSORS = 8

DRIVER = """
import json, os, resource, sys, time
from pathlib import Path
from looop_py.beat.pulse import beat
from looop_py.coord.choose import Reopening
from looop_py.workdir.paths import Paths
try:
    from looop_py.ops.goalwatch import GoalWatch
    from looop_py.ops.resident import up_beat
except ImportError:  # an install whose `up` ran the full beat every time
    GoalWatch = up_beat = None
opened = Reopening(Paths(Path(sys.argv[1])))
watch = GoalWatch(str(opened.paths.goals)) if GoalWatch else None
def cpu():
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
for _ in sys.stdin:
    wd = opened.current()
    c0, t0 = cpu(), time.perf_counter()
    result = up_beat(wd, watch) if watch else beat(wd)
    t1, c1 = time.perf_counter(), cpu()
    print(json.dumps([t1 - t0, c1 - c0, str(result.outcome)]), flush=True)
"""


def workdir(python: str, goals: int, tag: str) -> Path:
    root = Path(tempfile.mkdtemp(prefix=f"looop-bench-up-{goals}g-{tag}-")) / "wd"
    looop = [python, "-m", "looop_py"]
    subprocess.run([*looop, "init", str(root)], check=True, capture_output=True)
    for path in [*(root / "sensors").glob("*.sh"), *(root / "goals").glob("*.md")]:
        path.unlink()
    for i in range(SENSORS):
        add_sensor(root, f"s{i:03}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(goals):
        (root / "goals" / f"goal-{i:05}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    subprocess.run([*looop, "-C", str(root), "pulse", "-q"], check=True)  # decides, commits
    return root


class Resident:
    """One driver process: a beat of `up` per request."""

    def __init__(self, python: str, root: Path) -> None:
        self.proc = subprocess.Popen(
            [python, "-c", DRIVER, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def beat(self) -> tuple[float, float, str]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("beat\n")
        self.proc.stdin.flush()
        wall, cpu, outcome = json.loads(self.proc.stdout.readline())
        return wall, cpu, outcome

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def cron(looop: list[str], root: Path) -> tuple[float, float, str]:
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen([*looop, "-C", str(root), "pulse", "-q"], stdout=devnull)
        _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, "?"


def lstat_floor(folder: Path) -> float:
    """CPU seconds to list goals/ and lstat each entry (beside the folder's descriptor)."""
    c0 = time.process_time()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in os.listdir(fd):
            os.lstat(name, dir_fd=fd)
    finally:
        os.close(fd)
    return time.process_time() - c0


def main() -> None:
    cases: dict[str, object] = {}
    roots: list[Path] = []
    for n, python in enumerate(PYTHONS):
        looop = [python, "-m", "looop_py"]
        beside = Path(python).with_name("looop")
        if beside.exists():
            looop = [str(beside)]
        for goals in SIZES:
            up_root, cron_root = workdir(python, goals, f"up{n}"), workdir(python, goals, f"c{n}")
            roots += [up_root, cron_root]
            cases[f"[{n}] up   {goals:>6} goals"] = Resident(python, up_root)
            cases[f"[{n}] cron {goals:>6} goals"] = (looop, cron_root)
    floor_dir = roots[-1] / "goals"
    samples: dict[str, list[tuple[float, float, str]]] = {name: [] for name in cases}
    floors: list[float] = []
    try:
        for _ in range(2 + ROUNDS):
            for name, case in cases.items():
                if isinstance(case, Resident):
                    samples[name].append(case.beat())
                else:
                    looop, root = case  # type: ignore[misc]
                    samples[name].append(cron(looop, root))
            floors.append(lstat_floor(floor_dir))
    finally:
        for case in cases.values():
            if isinstance(case, Resident):
                case.close()
    load = os.getloadavg()
    print(f"`looop up` quiet beat by size, {ROUNDS} interleaved rounds, load {load[0]:.1f}")
    for n, python in enumerate(PYTHONS):
        print(f"[{n}] {python}")
    wall = {k: statistics.median(s[0] for s in v[2:]) * 1000 for k, v in samples.items()}
    cpu = {k: statistics.median(s[1] for s in v[2:]) * 1000 for k, v in samples.items()}
    for name, found in samples.items():
        outcomes = {s[2] for s in found[2:]}
        base = name.replace(f"{SIZES[1]:>6}", f"{SIZES[0]:>6}")
        print(
            f"{name}: wall {wall[name]:7.1f} ms ({wall[name] / wall[base]:.2f}x)"
            f"  cpu {cpu[name]:7.1f} ms ({cpu[name] / cpu[base]:.2f}x)"
            + (f"  outcomes {sorted(outcomes)}" if outcomes != {"?"} else "")
        )
    print(f"floor: list goals/ + lstat 10,000 goals, cpu {statistics.median(floors) * 1000:.1f} ms")
    for root in roots:
        cleanup(root)


if __name__ == "__main__":
    main()
