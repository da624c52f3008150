"""Bugs in a step are visible; a maker that exits 0 without `looop done` is not a failure;
a sensor that breaks in the same beat does not cost a goal its trigger."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from looop_py.beat import views
from looop_py.beat.pulse import beat
from looop_py.deciders.rules import RulesDecider
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init
from tests.conftest import open_wd, run_looop, write_sensor


def test_a_step_that_raises_is_logged_named_and_shown_until_a_clean_beat(
    wd: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looop_py.loops import advance

    wd.goal("lp").write_text("---\nintent: t\nlevel: L1\nruntime: shell\nmaker: true\n---\n")

    def boom(wd: object, now: float) -> list[dict[str, object]]:
        raise RuntimeError("kaboom in advance")

    monkeypatch.setattr(advance, "advance", boom)
    result = beat(open_wd(wd))
    assert result.outcome == "decided"  # the beat went on
    assert result.failed_steps == ("advance",)
    log = wd.error_log.read_text()
    assert "step advance failed" in log and "Traceback" in log and "kaboom in advance" in log
    last = journal.last_event(wd, "beat")
    assert last is not None and last["failed_steps"] == ["advance"]
    failure = [e for e in journal.recent_events(wd) if e["event"] == "advance_failed"]
    assert failure and failure[-1]["step"] == "advance"
    shown = views.status(open_wd(wd)).failed_steps
    assert shown is not None and shown.steps == ("advance",)
    out = run_looop("-C", str(wd.root), "status", "--json")
    assert json.loads(out.stdout)["failed_steps"]["steps"] == ["advance"]

    assert beat(open_wd(wd)).failed_steps == ("advance",)  # still failing: still shown
    assert views.status(open_wd(wd)).failed_steps is not None
    monkeypatch.undo()
    assert beat(open_wd(wd)).failed_steps == ()
    assert views.status(open_wd(wd)).failed_steps is None  # a clean beat clears it


def test_a_probe_that_raises_is_named_too(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    from looop_py.sensing import probes

    def broken(seen: probes.Seen) -> dict[str, object]:
        raise KeyError("oops")

    monkeypatch.setattr(probes, "PROBES", (*probes.PROBES[:-1], ("sys-rounds", broken)))
    result = beat(open_wd(wd))
    assert "probe sys-rounds" in result.failed_steps
    assert "probe sys-rounds failed" in wd.error_log.read_text()


LOOP = """---
intent: exit 0 without looop done
level: L1
runtime: shell
maker: |
  echo made
checker: |
  echo checked
---
"""


@pytest.mark.slow
def test_twelve_rounds_whose_workers_exit_0_without_done_end_done_with_concerns(
    wd: Paths,
) -> None:
    """The completion race: a worker is finished once its exit code is recorded."""
    from looop_py.loops.advance import run

    wd.goal("lp").write_text(LOOP)
    outcomes = []
    for _ in range(12):
        report = run(open_wd(wd), "lp")
        assert report.maker is not None and report.checker is not None, report.error
        outcomes.append((report.maker.status.value, report.checker.status.value))
    assert outcomes == [("done-with-concerns", "done-with-concerns")] * 12


def test_a_sensor_breaking_in_the_same_beat_keeps_the_welcome_goals_trigger(
    tmp_path: Path,
) -> None:
    """The starter work dir (rules decider, welcome goal on [disk, git]) plus one broken sensor."""
    paths = Paths(init(tmp_path / "wd").root)
    write_sensor(paths, "broken", "exit 1")
    t0 = time.time()
    first = beat(open_wd(paths, clock=lambda: t0), decider=RulesDecider())
    assert first.move is not None and first.move["action"] == "ask_human"
    assert first.move.get("next_interval_s")  # the queued goal starts on the next beat
    second = beat(open_wd(paths, clock=lambda: t0 + 60), decider=RulesDecider())
    assert second.outcome == "decided", second
    assert second.move == {
        **second.move,
        "action": "start_worker",
        "id": "welcome",
    }
