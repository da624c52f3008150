"""The rules decider's queue (state/rules-pending.json): written when it changes, left
alone (no write, no fsync) when a decide leaves it as it was."""

from __future__ import annotations

import json
import time

from looop_py.deciders.base import request_in
from looop_py.deciders.rules import PENDING, RulesDecider
from looop_py.sensing.sense import sense
from looop_py.workdir.paths import Paths
from looop_py.world import Change
from tests.conftest import open_wd

GOAL = "---\non: [ci]\nruntime: shell\nwork: echo {name}\n---\n# {name}\n"
CI_CHANGED = (Change("snap:sensor-ci", '"green"', '"red"'),)


def _decide(wd: Paths, changed: tuple[Change, ...] = ()) -> dict[str, object]:
    seen = sense(open_wd(wd), time.time())
    request = request_in(wd, time.time(), items=seen.items, changed=changed, goals=seen.goals)
    move: dict[str, object] = RulesDecider().decide(request).move
    return move


def _file(wd: Paths) -> tuple[int, int, bytes]:
    path = wd.state / PENDING
    st = path.stat()
    return st.st_ino, st.st_mtime_ns, path.read_bytes()


def test_a_damaged_queue_is_written_afresh(wd: Paths) -> None:
    wd.state.mkdir(exist_ok=True)
    (wd.state / PENDING).write_bytes(b"\x00 not json {{")
    assert _decide(wd)["action"] == "noop"
    assert json.loads((wd.state / PENDING).read_bytes()) == {"v": 1, "pending": []}


def test_a_queue_that_moves_is_written_and_one_that_stays_is_not(wd: Paths) -> None:
    for name in ("alpha", "beta"):
        (wd.goals / f"{name}.md").write_text(GOAL.format(name=name))
    started = _decide(wd, CI_CHANGED)  # both triggered: one starts, one waits
    assert started["action"] == "start_worker"
    waiting = json.loads((wd.state / PENDING).read_bytes())["pending"]
    assert len(waiting) == 1 and waiting[0] != started["id"]
    nxt = _decide(wd)  # the waiting one starts: the queue empties
    assert nxt["action"] == "start_worker" and nxt["id"] == waiting[0]
    assert json.loads((wd.state / PENDING).read_bytes()) == {"v": 1, "pending": []}
    before = _file(wd)
    assert _decide(wd)["action"] == "noop"  # nothing queued, nothing triggered
    assert _file(wd) == before  # not rewritten: same inode, same mtime
