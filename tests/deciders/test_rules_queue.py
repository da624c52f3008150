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


def test_a_queued_goal_that_broke_or_went_is_dropped_from_the_queue(wd: Paths) -> None:
    (wd.goals / "alpha.md").write_text("---\non: [ci\n---\n# alpha, its frontmatter broken\n")
    (wd.goals / "beta.md").write_text(GOAL.format(name="beta"))
    (wd.goals / "delta.md").mkdir()  # a goal that cannot be read
    wd.state.mkdir(exist_ok=True)
    queue = {"v": 1, "pending": ["alpha", "gone", "delta", "beta", 7]}
    (wd.state / PENDING).write_text(json.dumps(queue))
    move = _decide(wd)
    assert (move["action"], move["id"]) == ("start_worker", "beta")
    assert json.loads((wd.state / PENDING).read_bytes()) == {"v": 1, "pending": []}


class _Plain:
    """A goal with no fence that counts how often its id or error is read."""

    reads = 0
    fenced = False

    def __init__(self, goal_id: str) -> None:
        self._id = goal_id

    @property
    def id(self) -> str:
        _Plain.reads += 1
        return self._id

    @property
    def error(self) -> None:
        _Plain.reads += 1

    def text(self) -> str:
        return f"# {self._id}\n"


def test_an_empty_queue_reads_nothing_of_the_plain_goals(wd: Paths) -> None:
    """Only the fenced goals may trigger: with nothing queued, a decide at 10,000 goals makes
    no pass over the plain ones (a queue that holds something still checks them)."""
    (wd.goals / "alpha.md").write_text(GOAL.format(name="alpha"))
    seen = sense(open_wd(wd), time.time())
    goals = (*seen.goals, *(_Plain(f"plain-{i}") for i in range(100)))
    request = request_in(wd, time.time(), items=seen.items, changed=(), goals=goals)
    _Plain.reads = 0
    assert RulesDecider().decide(request).move["action"] == "noop"
    assert _Plain.reads == 0, "an empty queue made a pass over the plain goals"
    (wd.state / PENDING).write_text(json.dumps({"v": 1, "pending": ["plain-7"]}))
    assert RulesDecider().decide(request).move["action"] == "start_worker"
    assert _Plain.reads > 0
