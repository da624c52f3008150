"""Benchmark (i): how often a loop round wakes the decider — judgment it did not need.

Runs whole loop rounds through real beats (maker and checker are shell workers)
with a decider that only counts its wakes: an L1 round, whose report a human
or the decider should see, and an L3 round that simply proceeds. The engine
advances rounds itself, so the round's own phases and workers never reach the
decider; only its report does.

    python bench/round_wakes.py [ROUNDS]
"""

from __future__ import annotations

import json
import sys
import time

from _common import cleanup, fresh_workdir

from looop_py.beat.pulse import beat
from looop_py.coord.choose import open_workdir
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.loops.advance import start_round
from looop_py.workdir.paths import Paths

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 3
DONE = '"$LOOOP_BIN" done --summary'


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.wakes = 0

    def decide(self, request: DecideRequest) -> Decision:
        self.wakes += 1
        return Decision({"action": "noop", "reason": "counted"})


def loop_goal(paths: Paths, level: str, extra: dict[str, str]) -> None:
    lines = ["---", "intent: sweep the repo", f"level: {level}", "runtime: shell"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    lines += ["maker: |", f'  echo looking; {DONE} "found 2 things"']
    lines += ["checker: |", f'  {DONE} "both are real"', "---", "# sweep", ""]
    (paths.goals / "sweep.md").write_text("\n".join(lines))


def phases_done(paths: Paths) -> int:
    found = [*paths.rounds.glob("*.json"), *(paths.rounds / "done").glob("*.json")]
    return sum(1 for p in found if json.loads(p.read_text()).get("phase") == "done")


def wakes_per_round(level: str, extra: dict[str, str]) -> tuple[int, int, int]:
    root = fresh_workdir("wakes")
    paths = Paths(root)
    loop_goal(paths, level, extra)
    wd = open_workdir(paths)  # once for this work dir: every beat and round gets it
    try:
        decider = Counting()
        beat(wd, decider=decider)  # the world as it starts
        decider.wakes, beats = 0, 0
        for i in range(ROUNDS):
            start_round(wd, "sweep", now=time.time(), trigger="bench")
            deadline = time.monotonic() + 60
            while phases_done(paths) < i + 1:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{level}: round {i + 1} did not finish")
                beat(wd, decider=decider)
                beats += 1
                time.sleep(0.05)
            for _ in range(3):  # the round is over: nothing more to hear
                beat(wd, decider=decider)
                beats += 1
    finally:
        wd.close()
    cleanup(root)
    return decider.wakes, beats, ROUNDS


def main() -> None:
    print(f"decider wakes per loop round, {ROUNDS} rounds each")
    for level, extra in (
        ("L1-report", {}),
        ("L3-unattended", {"action": "report", "allow": "[report]"}),
    ):
        wakes, beats, rounds = wakes_per_round(level, extra)
        print(
            f"  {level:14} {wakes / rounds:4.1f} wakes per round   ({beats} beats, {rounds} rounds)"
        )


if __name__ == "__main__":
    main()
