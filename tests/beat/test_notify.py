"""`[notify] command`: once per event across beats, never failing a beat."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, write_sensor


def _hook(wd: Paths, command: str, extra: str = "") -> None:
    cfg = wd.config.read_text()
    wd.config.write_text(cfg + f"\n[notify]\ncommand = '''{command}'''\n{extra}")


def test_a_new_ask_is_notified_exactly_once_across_many_beats(wd: Paths, tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    _hook(wd, f'cat >> {log}; echo "$LOOOP_EVENT_KIND $LOOOP_EVENT_ID" >> {log}.env')
    write_sensor(wd, "s", "echo 1")
    beat(open_wd(wd))
    assert not log.exists()  # nothing to hear about yet
    mailbox.open_ask(open_wd(wd), prompt="merge PR 12?", asker="human", now=time.time())
    for _ in range(5):
        beat(open_wd(wd))
        beat(open_wd(wd), force=True)
    events = [jsonio.loads(line) for line in log.read_text().splitlines()]
    assert len(events) == 1
    assert events[0]["kind"] == "ask" and events[0]["id"] == "human-1"
    assert "merge PR 12?" in events[0]["text"]
    assert (tmp_path / "hook.log.env").read_text() == "ask human-1\n"
    mailbox.open_ask(open_wd(wd), prompt="and PR 13?", asker="human", now=time.time())
    beat(open_wd(wd))
    beat(open_wd(wd))
    assert len(log.read_text().splitlines()) == 2


def test_a_failing_or_hanging_hook_never_fails_a_beat(wd: Paths) -> None:
    _hook(wd, "echo boom >&2; exit 3")
    write_sensor(wd, "s", "echo 1")
    mailbox.open_ask(open_wd(wd), prompt="q1", asker="human", now=time.time())
    first = beat(open_wd(wd))
    assert first.outcome is BeatOutcome.DECIDED
    assert "notify hook failed for ask" in wd.journal.read_text()
    assert "exit 3: boom" in wd.journal.read_text()
    assert beat(open_wd(wd)).outcome is BeatOutcome.SKIPPED
    assert wd.journal.read_text().count("notify hook failed") == 2  # not sent: tried again
    wd.config.write_text('[decider]\nbackend = "noop"\n')
    _hook(wd, "sleep 30", "timeout_s = 0.5\n")
    mailbox.open_ask(open_wd(wd), prompt="q2", asker="human", now=time.time())
    started = time.monotonic()
    assert beat(open_wd(wd)).outcome is BeatOutcome.DECIDED
    assert time.monotonic() - started < 10
    assert "timed out after 0.5 s" in wd.journal.read_text()


def test_failing_beats_in_a_row_are_one_event(wd: Paths, tmp_path: Path) -> None:
    log = tmp_path / "hook.log"
    wd.config.write_text('[decider]\nbackend = "command"\ncommand = "exit 1"\n')
    backoff = "[limits]\nbackoff_base_s = 0.001\nbackoff_max_s = 0.001\n"
    _hook(wd, f"cat >> {log}", "fail_streak = 2\n" + backoff)
    write_sensor(wd, "s", "echo 1")
    # A clock a second on at each reading: the 1 ms backoff has always passed by the next
    # beat, even if the host's clock steps back meanwhile (a HELD beat once, under load).
    ticks = itertools.count(time.time(), 1.0)
    outcomes = [beat(open_wd(wd, clock=lambda: next(ticks))).outcome for _ in range(5)]
    assert outcomes == [BeatOutcome.FAILED] * 5
    events = [jsonio.loads(line) for line in log.read_text().splitlines()]
    assert [e["kind"] for e in events] == ["beat-failing"]
    assert events[0]["streak"] == 2


def test_a_worker_that_ends_badly_is_one_event(wd: Paths, tmp_path: Path) -> None:
    from tests.conftest import invoke_looop, wait_for

    log = tmp_path / "hook.log"
    _hook(wd, f"cat >> {log}")
    r = invoke_looop("-C", str(wd.root), "worker", "start", "w1", "-", input="exit 3\n")
    assert r.returncode == 0, r.stderr
    wait_for((wd.sessions / "w1" / "status.json").exists, 10, "the worker's status")
    wait_for(lambda: jsonio.read_json(wd.sessions / "w1" / "status.json")["state"] != "running")
    for _ in range(3):
        beat(open_wd(wd))
    events = [jsonio.loads(line) for line in log.read_text().splitlines()]
    assert [(e["kind"], e["id"]) for e in events] == [("worker-dead", "w1")]
    assert "exit 3" in events[0]["text"]


def test_the_hook_gets_secrets_only_when_named(
    wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NTFY_TOKEN", "tk-123456")
    monkeypatch.setenv("OTHER_TOKEN", "ot-123456")
    out = tmp_path / "env.txt"
    _hook(
        wd,
        f'echo "${{NTFY_TOKEN:-none}} ${{OTHER_TOKEN:-none}}" >> {out}',
        'env = ["NTFY_TOKEN"]\n',
    )
    mailbox.open_ask(open_wd(wd), prompt="q", asker="human", now=time.time())
    beat(open_wd(wd))
    assert out.read_text() == "tk-123456 none\n"
