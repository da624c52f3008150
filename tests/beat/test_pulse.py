"""One beat end to end: skip, wake, commit-after-decision, locking, crash safety."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from looop_py import jsonio
from looop_py.beat.pulse import beat, load_committed
from looop_py.deciders.base import DecideError, DecideRequest, Decision
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for, write_sensor


class Counting:
    """A decider that records every call and answers noop (or fails on demand)."""

    name = "counting"

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[DecideRequest] = []
        self.fail = fail

    def decide(self, request: DecideRequest) -> Decision:
        self.calls.append(request)
        if self.fail:
            raise DecideError("backend exploded")
        return Decision(move={"action": "noop", "reason": "test"})


def events(wd: Paths) -> list[dict[str, Any]]:
    return journal.recent_events(wd, 10_000)


def test_first_beat_decides_then_unchanged_world_skips(wd: Paths) -> None:
    write_sensor(wd, "steady", "echo steady")
    d = Counting()
    first = beat(open_wd(wd), decider=d)
    assert first.outcome == "decided" and len(d.calls) == 1
    journal_before = wd.journal.read_text()
    second = beat(open_wd(wd), decider=d)
    assert second.outcome == "skipped" and len(d.calls) == 1
    assert second.world_hash == first.world_hash
    assert wd.journal.read_text() == journal_before  # a skip writes no journal line
    beats = [e for e in events(wd) if e["event"] == "beat"]
    assert [b["outcome"] for b in beats] == ["decided", "skipped"]


def test_force_decides_on_an_unchanged_world(wd: Paths) -> None:
    d = Counting()
    beat(open_wd(wd), decider=d)
    forced = beat(open_wd(wd), decider=d, force=True)
    assert forced.outcome == "decided" and forced.forced and len(d.calls) == 2
    assert d.calls[1].forced and d.calls[1].changed == ()


def test_wake_rule_detail_never_wakes_signal_always_does(wd: Paths) -> None:
    """100 beats; detail changes every beat, signal on 10 of them → 11 decides."""
    counter = wd.root / "n"
    write_sensor(
        wd,
        "ticker",
        f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}\n"
        'printf \'{"signal": %d, "detail": {"beat": %d}}\' $(( n / 10 )) "$n"\n',
    )
    d = Counting()
    for _ in range(100):
        beat(open_wd(wd), decider=d)
    # n runs 1..100; n // 10 takes values 0..10: the first beat plus 10 changes.
    assert len(d.calls) == 11


def test_failed_decide_does_not_commit_so_a_later_beat_retries(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    t0 = time.time()
    broken = Counting(fail=True)
    result = beat(open_wd(wd, clock=lambda: t0), decider=broken)
    assert result.outcome == "failed" and "backend exploded" in (result.reason or "")
    assert load_committed(wd).hash is None
    assert "✗ decider counting failed: backend exploded" in wd.journal.read_text()
    ok = Counting()
    held = beat(open_wd(wd, clock=lambda: t0 + 10), decider=ok)  # inside the 60 s backoff
    assert held.outcome == "held" and "backoff" in (held.reason or "") and ok.calls == []
    assert beat(open_wd(wd, clock=lambda: t0 + 61), decider=ok).outcome == "decided"
    assert load_committed(wd).hash is not None


def test_garbage_move_is_a_failed_beat(wd: Paths) -> None:
    class Garbage:
        name = "garbage"

        def decide(self, request: DecideRequest) -> Decision:
            return Decision(move=["not", "a", "move"])

    result = beat(open_wd(wd), decider=Garbage())
    assert result.outcome == "failed"
    assert load_committed(wd).hash is None


def test_changed_items_name_old_and_new(wd: Paths) -> None:
    flag = wd.root / "flag"
    flag.write_text("a")
    write_sensor(wd, "flag", f"cat {flag}")
    beat(open_wd(wd), decider=Counting())
    flag.write_text("b")
    (wd.goals / "new.md").write_text("# new goal\n")
    d = Counting()
    result = beat(open_wd(wd), decider=d)
    changes = {c.item: (c.old, c.new) for c in result.changed}
    assert changes["snap:sensor-flag"] == ('"a"', '"b"')
    assert changes["goal:new"][0] is None
    assert {c.item for c in d.calls[0].changed} == set(changes)


def test_playbook_and_goal_edits_wake_but_archive_does_not(wd: Paths) -> None:
    d = Counting()
    beat(open_wd(wd), decider=d)
    (wd.goals_archive / "old.md").write_text("archived")
    assert beat(open_wd(wd), decider=d).outcome == "skipped"
    wd.playbook.write_text(wd.playbook.read_text() + "\nmore policy\n")
    assert beat(open_wd(wd), decider=d).outcome == "decided"


def test_sensor_script_edit_alone_does_not_wake(wd: Paths) -> None:
    script = write_sensor(wd, "s", "echo 1\n")
    d = Counting()
    beat(open_wd(wd), decider=d)
    script.write_text(script.read_text() + "# a comment\n")
    assert beat(open_wd(wd), decider=d).outcome == "skipped"


def test_broken_sensor_wakes_once_and_stderr_churn_does_not(wd: Paths) -> None:
    write_sensor(wd, "flaky", 'echo "noise $RANDOM" >&2; exit 2')
    d = Counting()
    assert beat(open_wd(wd), decider=d).outcome == "decided"
    assert beat(open_wd(wd), decider=d).outcome == "skipped"


def test_locked_beat_steps_aside(wd: Paths) -> None:
    from looop_py.locks import PulseLock

    wd.state.mkdir(exist_ok=True)
    holder = PulseLock(wd.pulse_lock)
    assert holder.acquire()
    try:
        d = Counting()
        result = beat(open_wd(wd), decider=d)
        assert result.outcome == "locked" and d.calls == []
    finally:
        holder.release()


@pytest.mark.slow
def test_concurrent_pulses_one_beats_the_rest_step_aside(wd: Paths) -> None:
    write_sensor(wd, "slow", "sleep 1; echo ok")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "looop_py", "-C", str(wd.root), "pulse", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outcomes = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outcomes.append(jsonio.loads(out)["outcome"])
    assert outcomes.count("decided") == 1
    assert outcomes.count("locked") == 5


def test_pulse_killed_mid_beat_leaves_intact_files(wd: Paths) -> None:
    write_sensor(wd, "quick", "echo ok")
    assert invoke_looop("-C", str(wd.root), "pulse").returncode == 0
    write_sensor(wd, "slow", "echo $$ > slow.tmp; mv slow.tmp slow.started; sleep 30; echo late")
    p = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "pulse"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for((wd.root / "slow.started").exists, 20, "the slow sensor to start")
    p.send_signal(signal.SIGKILL)
    p.wait()
    # A SIGKILLed pulse ends none of its sensors: this one sleeps on in its own group (the
    # next beat does not know it), so the test ends it rather than leave it to the session.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(int((wd.root / "slow.started").read_text()), signal.SIGKILL)
    # Every state file still parses, and the next beat runs cleanly.
    for f in [*wd.snapshots.glob("*.json"), *wd.state.glob("*.json")]:
        jsonio.read_json(f)
    for line in wd.events.read_bytes().splitlines():
        jsonio.loads(line)
    (wd.sensors / "slow.sh").unlink()
    done = invoke_looop("-C", str(wd.root), "pulse", "--json")
    assert done.returncode == 0, done.stderr
    assert jsonio.loads(done.stdout)["outcome"] in ("decided", "skipped")


def test_sigterm_ends_the_beat_and_its_sensor_groups(wd: Paths) -> None:
    import psutil

    marker = f"looop-sigterm-test-sensor-{os.getpid()}"  # not another run's
    write_sensor(wd, "slow", f"echo started > slow.started; exec -a {marker} sleep 30")
    p = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "pulse"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def left() -> list[psutil.Process]:
        procs = psutil.process_iter(["cmdline"])
        return [x for x in procs if marker in " ".join(x.info["cmdline"] or [])]

    wait_for(left, 20, "the slow sensor's exec")  # it runs, under its marker
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)
    # The beat ended its sensor's group: gone at once, not when its 30 s sleep ends.
    wait_for(lambda: left() == [], 2, lambda: f"the sensor to be gone: {left()}")


@pytest.mark.parametrize("n_goals", [100])
def test_many_goals_hash_each_one(wd: Paths, n_goals: int) -> None:
    for i in range(n_goals):
        (wd.goals / f"g{i:03}.md").write_text(f"goal {i}\n")
    d = Counting()
    result = beat(open_wd(wd), decider=d)
    assert sum(1 for c in result.changed if c.item.startswith("goal:")) == n_goals + 1
    (wd.goals / "g050.md").write_text("goal 50, edited\n")
    again = beat(open_wd(wd), decider=d)
    assert [c.item for c in again.changed] == ["goal:g050"]


def test_the_beat_event_names_only_sensors_that_changed_or_failed(wd: Paths) -> None:
    write_sensor(wd, "steady", "echo steady")
    write_sensor(wd, "broken", "exit 3")
    beat(open_wd(wd), decider=Counting())
    beat(open_wd(wd), decider=Counting())
    first, second = [e for e in events(wd) if e["event"] == "beat"]
    assert set(first["sensors"]) == {"steady", "broken"} and first["sensors_steady"] == 0
    assert set(second["sensors"]) == {"broken"} and second["sensors_steady"] == 1
