"""Rounds cost no judgment: the engine advances a round itself, and the decider hears of it
once, when it ends, whichever way (one wake per round, its report)."""

from __future__ import annotations

import time

import pytest

from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.loops.advance import start_round
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, wait_for
from tests.loops.test_e2e import DONE, finished, loop_goal, rounds_of

MAKER = f'echo looking; {DONE} "found 2 things"'
CHECKER = f'{DONE} "both are real"'


class Counting:
    name = "counting"

    def __init__(self) -> None:
        self.wakes: list[list[str]] = []

    def decide(self, request: DecideRequest) -> Decision:
        self.wakes.append([c.item for c in request.changed])
        return Decision({"action": "noop", "reason": "counted"})


def run_round(wd: Paths, level: str, **extra: str) -> Counting:
    (wd.goals / "welcome.md").unlink()
    loop_goal(wd, "sweep", level, MAKER, CHECKER, **extra)
    decider = Counting()
    beat(open_wd(wd), decider=decider)  # the world as it starts: one wake, before any round
    assert len(decider.wakes) == 1
    decider.wakes.clear()
    start_round(open_wd(wd), "sweep", now=time.time(), trigger="test")

    def beaten() -> bool:
        if finished(wd)():
            return True
        result = beat(open_wd(wd), decider=decider)
        assert result.outcome in (BeatOutcome.SKIPPED, BeatOutcome.DECIDED)
        return False

    wait_for(beaten, 30, lambda: f"the round to finish: {rounds_of(wd)}", interval=0.05)
    for _ in range(3):  # the round is over: nothing more to hear
        beat(open_wd(wd), decider=decider)
    return decider


@pytest.mark.slow
def test_an_l1_round_wakes_the_decider_once_for_its_report(wd: Paths) -> None:
    decider = run_round(wd, "L1-report")
    (r,) = rounds_of(wd)
    assert r["outcome"] == "reported"
    assert decider.wakes == [["snap:sys-rounds"]], decider.wakes


@pytest.mark.slow
def test_a_round_that_proceeds_wakes_it_once_too(wd: Paths) -> None:
    """Before: a proceeded round never reached the decider (nor the journal)."""
    decider = run_round(wd, "L3-unattended", action="report", allow="[report]")
    (r,) = rounds_of(wd)
    assert r["outcome"] == "proceeded"
    assert decider.wakes == [["snap:sys-rounds"]], decider.wakes
    assert f"round {r['id']} of sweep ended proceeded" in wd.journal.read_text()
