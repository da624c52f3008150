"""Each beat reads PLAYBOOK and goals once: what the DIFF hashed is what the prompt shows."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from looop_py.beat import pulse
from looop_py.beat.decide import gather_prompt
from looop_py.beat.preview import preview
from looop_py.coord.choose import open_workdir
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.sensing.sense import sense
from looop_py.workdir.paths import Paths
from looop_py.world import digest
from tests.conftest import open_wd

LOOP_GOAL = """---
intent: Say hello on a cadence.
level: L1-report
cadence: every 1h
maker: |
  echo hello
checker: |
  echo checked
---
# hello
"""


def test_the_prompt_shows_the_goal_text_that_was_hashed(wd: Paths) -> None:
    (wd.goals / "tidy.md").write_text("# Tidy\nthe version that was hashed\n")
    seen = sense(open_wd(wd), time.time())
    (wd.goals / "tidy.md").write_text("# Tidy\nan edit made after SENSE\n")  # mid-beat edit
    text = gather_prompt(
        open_wd(wd),
        now=time.time(),
        seen=seen,
        changed=(),
        forced_by="force",
        flapping=[],
        last_failure=None,
    )
    assert "the version that was hashed" in text
    assert "an edit made after SENSE" not in text
    body = next(g.body for g in seen.goals if g.id == "tidy")
    assert seen.items["goal:tidy"] == digest(body)


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[DecideRequest] = []

    def decide(self, request: DecideRequest) -> Decision:
        self.requests.append(request)
        return Decision({"action": "noop", "reason": "recorded"})


def test_the_decider_gets_the_goals_of_the_beat_and_no_work_dir_object(wd: Paths) -> None:
    (wd.goals / "tidy.md").write_text("# Tidy\n")
    backend = Recorder()
    result = pulse.beat(open_wd(wd), decider=backend)
    assert result.outcome == "decided"
    (request,) = backend.requests
    assert {g.id for g in request.goals} == {"tidy", "welcome"}
    assert request.workdir == wd.root and request.state_dir == wd.state
    assert request.env["LOOOP_DIR"] == str(wd.root)
    assert not hasattr(request, "paths")


def _state_files(paths: Paths) -> dict[str, tuple[int, int]]:
    found = {}
    for root, _dirs, files in os.walk(paths.state):
        for name in files:
            st = (Path(root) / name).stat()
            found[str(Path(root, name).relative_to(paths.state))] = (st.st_mtime_ns, st.st_size)
    return found


def test_looop_sense_writes_nothing_under_state(wd: Paths) -> None:
    (wd.goals / "hello.md").write_text(LOOP_GOAL)
    wd.state.mkdir(exist_ok=True)
    (wd.state / "pulse.lock").touch()  # the lock file is the one thing a sense may need
    before = _state_files(wd)
    view = preview(open_workdir(wd, write_cache=False))  # as `looop sense` opens it
    assert view.would_wake is True
    assert "sys-schedules" in view.world.snapshots
    assert _state_files(wd) == before  # no config cache, loop index or schedule book

    # The pulse, by contrast, keeps its caches there.
    pulse.beat(open_wd(wd))
    after = _state_files(wd)
    assert {"config-cache.json", "loops-index.json", "loop-schedule.json"} <= set(after)


def test_a_beat_lists_goals_and_builds_the_loop_index_once(
    wd: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looop_py.loops import index as loopindex
    from looop_py.workdir import goals

    (wd.goals / "hello.md").write_text(LOOP_GOAL)
    calls = {"scan": 0, "index": 0}
    real_scan, real_index = goals._scan_now, loopindex._index

    def scan(paths: Paths) -> object:
        calls["scan"] += 1
        return real_scan(paths)

    def index(paths: Paths, *, save: bool) -> object:
        calls["index"] += 1
        return real_index(paths, save=save)

    monkeypatch.setattr(goals, "_scan_now", scan)
    monkeypatch.setattr(loopindex, "_index", index)
    pulse.beat(open_wd(wd, clock=lambda: 1_700_000_000.0))
    assert calls == {"scan": 1, "index": 1}
    assert loopindex.index(open_wd(wd)) and calls["index"] == 2  # outside a beat: worked out afresh
