"""Every round end, foreground (`looop run`, an approval) or background (a beat), tells the
user and the decider the same way: one journal line (so `looop report` and the page show
it), one `round_step` event carrying its outcome, and one wake of the decider."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from looop_py.beat.pulse import beat
from looop_py.loops import store
from looop_py.loops.advance import start_round
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for
from tests.loops.test_e2e import DONE, finished, loop_goal, rounds_of, setup
from tests.loops.test_round_judgment import Counting

BLOCKED = '"$LOOOP_BIN" done --status blocked --summary "401 invalid x-api-key"'
# outcome → the loop's level, its maker, and its extra frontmatter (the rainy ones first)
ENDS: dict[str, tuple[str, str, dict[str, str]]] = {
    "failed": ("L1", "exit 3", {}),
    "blocked": ("L2-assisted", BLOCKED, {"action": "report"}),
    "budget-exhausted": (
        "L2",
        '"$LOOOP_BIN" done --tokens 5000 --summary "spent a lot"',
        {"budget": "{max_total_tokens: 1000}"},
    ),
    "reported": ("L1", f'{DONE} "two things need you"', {}),
}


def beat_until(wd: Paths, done: Any, decider: Counting) -> None:
    def beaten() -> bool:
        if done():
            return True
        beat(open_wd(wd), decider=decider)
        return False

    wait_for(beaten, 30, lambda: f"the round to end: {rounds_of(wd)}", interval=0.05)


def ends_of(wd: Paths, round_id: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in wd.events.read_text().splitlines()]
    return [
        e
        for e in events
        if e.get("event") == "round_step" and e.get("round") == round_id and e.get("outcome")
    ]


def told_once(wd: Paths, outcome: str, decider: Counting) -> dict[str, Any]:
    """The round ended `outcome`, and said so once: journal, event, report, the wake."""
    (r,) = rounds_of(wd)
    assert r["phase"] == "done" and r["outcome"] == outcome, r
    line = f"round {r['id']} of sweep ended {outcome}"
    assert wd.journal.read_text().count(line) == 1, wd.journal.read_text()
    (end,) = ends_of(wd, r["id"])
    assert end["outcome"] == outcome
    html = wd.root / "report.html"
    assert invoke_looop("-C", str(wd.root), "report", "--html", str(html)).returncode == 0
    assert line in html.read_text()
    assert store.reports(open_wd(wd).shelf).get("sweep") == r["id"]  # what wakes the decider
    for _ in range(3):  # beats after the end: the decider hears of it once
        beat(open_wd(wd), decider=decider)
    woken = [w for w in decider.wakes if "snap:sys-rounds" in w]
    assert len(woken) == 1, decider.wakes  # (an approval's end comes with its ask's change)
    return r


@pytest.mark.parametrize("outcome", list(ENDS))
def test_a_foreground_round_s_end_is_journaled_evented_reported_and_wakes_once(
    wd: Paths, outcome: str
) -> None:
    """Before: `looop run` printed the end and told nobody else: no journal line, no event,
    nothing in `looop report`, and the decider never heard of it."""
    setup(wd)
    level, maker, extra = ENDS[outcome]
    loop_goal(wd, "sweep", level, maker, f'{DONE} "checked"', **extra)
    decider = Counting()
    beat(open_wd(wd), decider=decider)  # the world as it is, before any round
    decider.wakes.clear()
    run = invoke_looop("-C", str(wd.root), "run", "sweep")
    assert f"({outcome})" in run.stdout, run.stdout + run.stderr
    told_once(wd, outcome, decider)


@pytest.mark.parametrize("outcome", list(ENDS))
def test_a_background_round_s_end_is_journaled_evented_reported_and_wakes_once(
    wd: Paths, outcome: str
) -> None:
    setup(wd)
    level, maker, extra = ENDS[outcome]
    loop_goal(wd, "sweep", level, maker, f'{DONE} "checked"', **extra)
    decider = Counting()
    beat(open_wd(wd), decider=decider)  # the world as it is, before any round
    decider.wakes.clear()
    start_round(open_wd(wd), "sweep", now=time.time(), trigger="test")
    beat_until(wd, finished(wd), decider=decider)
    told_once(wd, outcome, decider)


def test_a_round_an_approval_ends_is_journaled_evented_and_wakes_once(wd: Paths) -> None:
    """Before: `looop approve` drove the round to its end and only the approval was
    journaled; the round's end had no line, no event, and woke nobody."""
    setup(wd, '[actions.apply-patch]\ncommand = "true"\n')
    loop_goal(wd, "sweep", "L2", f'{DONE} "patched it"', f'{DONE} "green"', action="apply-patch")
    decider = Counting()
    beat(open_wd(wd), decider=decider)
    run = invoke_looop("-C", str(wd.root), "run", "sweep")
    assert "(escalated)" in run.stdout, run.stdout + run.stderr
    (r,) = rounds_of(wd)
    beat(open_wd(wd), decider=decider)  # the ask appears: a wake of its own, not the end's
    decider.wakes.clear()
    approved = invoke_looop("-C", str(wd.root), "approve", r["ask"])
    assert approved.returncode == 0, approved.stderr
    told_once(wd, "proceeded", decider)


def test_a_foreground_round_that_cannot_start_is_journaled_with_why(wd: Paths) -> None:
    """The daily budget spent: `looop run` refuses, and the journal says the loop is held."""
    setup(wd, "[limits]\ndaily_tokens = 100\n")
    loop_goal(wd, "sweep", "L1", f'{DONE} "never runs"', f'{DONE} "never runs"')
    spent = {"v": 2, "day": time.strftime("%Y-%m-%d"), "tokens": 500}
    wd.state.mkdir(exist_ok=True)
    (wd.state / "spend.json").write_text(json.dumps(spent))
    run = invoke_looop("-C", str(wd.root), "run", "sweep")
    assert run.returncode != 0 and "held" in run.stderr, run.stdout + run.stderr
    assert rounds_of(wd) == []
    assert "✗ loop sweep: no round started: loop sweep is held" in wd.journal.read_text()
    events = [json.loads(line) for line in wd.events.read_text().splitlines()]
    assert [e["loop"] for e in events if e.get("event") == "round_not_started"] == ["sweep"]
