"""Benchmark: the cost of a decide excluding the model — prompt build, parse, execute.

A work dir with 100 goals and 20 sensors; the decider answers instantly, so
what is timed is looop's own work around it. Also reports the prompt size.

    python bench/decide_overhead.py [RUNS]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from _common import add_sensor, cleanup, fresh_workdir

from looop_py.beat.decide import gather_prompt
from looop_py.beat.pulse import beat
from looop_py.coord.choose import open_workdir
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.moves import act, union
from looop_py.sensing.sense import sense
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


class Instant:
    name = "instant"

    def decide(self, request: DecideRequest) -> Decision:
        return Decision(move={"action": "write_goal", "id": "goal-000", "body": "# Goal 0\n"})


def ms(samples: list[float]) -> str:
    xs = sorted(s * 1000 for s in samples)
    return f"median {statistics.median(xs):7.2f} ms   min {xs[0]:7.2f} ms"


def main() -> None:
    root = fresh_workdir("decide")
    for i in range(20):
        add_sensor(root, f"s{i:02}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{"i": {i}}}}}\'')
    for i in range(100):
        (root / "goals" / f"goal-{i:03}.md").write_text(
            f"---\non: [s{i % 20:02}]\n---\n# Goal {i}\n\nKeep thing {i} tidy.\n"
        )
    wd = open_workdir(Paths(Path(root)))  # once: every timed step below gets this one
    try:
        measure(wd)
    finally:
        wd.close()
    cleanup(root)


def measure(wd: WorkDir) -> None:
    now = time.time()
    world = sense(wd, now)

    build, parse, execute, whole = [], [], [], []
    text = ""
    for _ in range(RUNS):
        t = time.perf_counter()
        text = gather_prompt(
            wd,
            now=now,
            seen=world,
            changed=(),
            forced_by="bench",
            flapping=[],
            last_failure=None,
        )
        build.append(time.perf_counter() - t)
        t = time.perf_counter()
        move = union.parse({"action": "write_goal", "id": "goal-000", "body": "# Goal 0\n"})
        parse.append(time.perf_counter() - t)
        t = time.perf_counter()
        act.execute(wd, move, now)
        execute.append(time.perf_counter() - t)
    for _ in range(min(RUNS, 10)):
        r = beat(wd, decider=Instant(), force=True)
        whole.append(r.duration_s - r.decide.get("ms", 0) / 1000)
    print(f"decide overhead, 100 goals + 20 sensors, {RUNS} runs")
    print(f"  prompt build                 {ms(build)}   ({len(text.encode())} bytes)")
    print(f"  move parse                   {ms(parse)}")
    print(f"  execute (write_goal)         {ms(execute)}")
    print(f"  whole forced beat minus the decider call, sensors included: {ms(whole)}")


if __name__ == "__main__":
    main()
