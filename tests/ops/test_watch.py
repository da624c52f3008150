"""What `looop up` sleeps on: real inotify watches on a real work dir (and the polling fallback).

Hostile cases first: an overflowing event queue, watched folders deleted, moved away and
recreated, temporary files, a beat's own bookkeeping, a worker that starts but has not ended.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.ops import inotify, watch
from looop_py.workdir.paths import Paths

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux")

QUIET_S = 0.3  # how long a "nothing happened" check listens (a bound, not a sleep)
HIT_S = 10.0  # generous: an event arrives in microseconds; a loaded machine may be slow


@pytest.fixture
def events(wd: Paths) -> Iterator[watch.Events]:
    w = watch.Events(wd)
    w.drain()
    yield w
    w.close()


def queue_limit() -> int:
    return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())


def status(folder: Path, state: str) -> None:
    jsonio.write_json(folder / watch.STATUS, {"state": state, "exit_code": None})


def test_an_overflowing_queue_rescans_and_watches_what_it_missed(
    wd: Paths, events: watch.Events
) -> None:
    # Fill the kernel's queue past its limit without reading it: events are dropped and
    # one IN_Q_OVERFLOW is queued. A worker folder created meanwhile was never reported.
    flood = wd.goals / "flood"
    flood.mkdir()  # its own create event, then its files' events are not ours: still fills
    for i in range(queue_limit() // 2 + 100):  # IN_CREATE + IN_CLOSE_WRITE per file
        (wd.goals / f"g{i}.md").write_text("x")
    (wd.sessions / "late").mkdir(parents=True)
    assert events.wait(HIT_S)
    assert events.rescans == 1
    assert wd.sessions / "late" in events.watched  # found by the rescan, not by an event
    events.drain()
    status(wd.sessions / "late", "exited")
    assert events.wait(HIT_S)  # the missed worker's end still wakes the pulse


def test_a_deleted_folder_is_a_change_and_is_watched_again_when_recreated(
    wd: Paths, events: watch.Events
) -> None:
    shutil.rmtree(wd.goals)
    assert events.wait(HIT_S)
    events.drain()
    assert wd.goals not in events.watched
    wd.goals.mkdir()
    assert events.wait(HIT_S)  # it reappeared (and may hold what nobody saw)
    assert wd.goals in events.watched
    events.drain()
    (wd.goals / "new.md").write_text("# New\n")
    assert events.wait(HIT_S)


def test_a_folder_moved_away_is_not_followed(wd: Paths, events: watch.Events) -> None:
    wd.goals.rename(wd.root / "goals.old")
    assert events.wait(HIT_S)
    events.drain()
    assert not events.wait(QUIET_S)
    (wd.root / "goals.old" / "stale.md").write_text("not a goal any more\n")
    assert not events.wait(QUIET_S)  # the watch did not follow it under its new name
    wd.goals.mkdir()
    assert events.wait(HIT_S)
    events.drain()
    (wd.goals / "fresh.md").write_text("# Fresh\n")
    assert events.wait(HIT_S)


def test_a_beats_own_bookkeeping_and_temporary_files_do_not_wake_it(
    wd: Paths, events: watch.Events
) -> None:
    (wd.goals / ".goal.md.swp").write_text("an editor's swap file")
    (wd.answers / ".a1.json.123-4.tmp").write_text("{}")
    (wd.root / "events.jsonl").write_text('{"event": "beat"}\n')
    (wd.root / "journal.md").write_text("journal\n")
    (wd.state / "last-world.json").write_text("{}")
    (wd.snapshots / "s.json").parent.mkdir(exist_ok=True)
    (wd.snapshots / "s.json").write_text("{}")
    jsonio.write_json(wd.claims / "db.json", {"holder": "w1"})  # a claim taken or renewed
    assert not events.wait(QUIET_S)


def test_a_worker_starting_does_not_wake_it_and_its_end_does(
    wd: Paths, events: watch.Events
) -> None:
    folder = wd.sessions / "w1"
    folder.mkdir(parents=True)
    status(folder, "running")
    (folder / "output.log").write_text("working\n")
    assert not events.wait(QUIET_S)
    assert folder in events.watched
    status(folder, "exited")
    assert events.wait(HIT_S)
    assert folder not in events.watched  # an ended worker's folder costs no watch


def test_finished_workers_are_not_watched(wd: Paths) -> None:
    for i in range(3):
        (wd.sessions / f"old{i}").mkdir(parents=True)
        status(wd.sessions / f"old{i}", "exited")
    (wd.sessions / "live").mkdir()
    status(wd.sessions / "live", "running")
    w = watch.Events(wd)
    try:
        assert {p for p in w.watched if p.parent == wd.sessions} == {wd.sessions / "live"}
    finally:
        w.close()


@pytest.mark.parametrize(
    "edit",
    [
        "goal written",
        "goal deleted",
        "sensor made executable",
        "sensor added",
        "answer",
        "ask",
        "approval",
        "playbook",
        "looop.toml",
        "claim released",
    ],
)
def test_each_edit_wakes_it(wd: Paths, edit: str) -> None:
    (wd.goals / "g.md").write_text("# G\n")
    sensor = wd.sensors / "s.sh"
    sensor.write_text("#!/bin/sh\necho '{}'\n")
    jsonio.write_json(wd.claims / "db.json", {"holder": "w1"})
    wd.approved.mkdir(parents=True, exist_ok=True)
    w = watch.Events(wd)
    try:
        w.drain()
        assert not w.wait(QUIET_S)
        {
            "goal written": lambda: (wd.goals / "g.md").write_text("# G, edited\n"),
            "goal deleted": (wd.goals / "g.md").unlink,
            "sensor made executable": lambda: sensor.chmod(0o755),
            "sensor added": lambda: (wd.sensors / "t.sh").write_text("#!/bin/sh\n"),
            "answer": lambda: jsonio.write_json(wd.answers / "a1.json", {"answer": "yes"}),
            "ask": lambda: jsonio.write_json(wd.asks / "a2.json", {"prompt": "?"}),
            "approval": lambda: jsonio.write_json(wd.approved / "m1", {"move": "m1"}),
            "playbook": lambda: wd.playbook.write_text("Be careful.\n"),
            "looop.toml": lambda: wd.config.write_text('[decider]\nbackend = "noop"\n\n'),
            "claim released": (wd.claims / "db.json").unlink,
        }[edit]()
        assert w.wait(HIT_S)
    finally:
        w.close()


def test_wake_ends_a_long_wait(events: watch.Events) -> None:
    threading.Timer(0.05, events.wake).start()
    assert events.wait(3600) is False  # returns at once: the caller checks its stop flag


def test_the_queue_overflow_event_parses() -> None:
    raw = inotify._HEADER.pack(-1, inotify.IN_Q_OVERFLOW, 0, 0)
    raw += inotify._HEADER.pack(3, inotify.IN_CREATE, 0, 16) + b"g.md".ljust(16, b"\0")
    first, second = inotify.parse(raw)
    assert first.overflow and first.wd == -1
    assert (second.wd, second.name, second.overflow) == (3, "g.md", False)


def test_polling_sees_the_edits_inotify_sees(wd: Paths) -> None:
    w = watch.Polling(wd)
    try:
        (wd.goals / ".swap").write_text("x")
        assert not w.wait(QUIET_S)
        (wd.goals / "g.md").write_text("# G\n")
        assert w.wait(HIT_S)
        w.drain()
        jsonio.write_json(wd.answers / "a1.json", {"answer": "yes"})
        assert w.wait(HIT_S)
        threading.Timer(0.05, w.wake).start()
        assert w.wait(3600) is False
    finally:
        w.close()


def test_closing_releases_its_descriptors(wd: Paths) -> None:
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        watch.Events(wd).close()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_worker_that_ended_before_its_folder_was_seen_wakes_it(
    wd: Paths, events: watch.Events
) -> None:
    staging = wd.root / "staging"
    staging.mkdir()
    status(staging, "exited")
    wd.sessions.mkdir(exist_ok=True)
    staging.rename(wd.sessions / "quick")  # appears with its exit record already written
    assert events.wait(HIT_S)
    assert wd.sessions / "quick" not in events.watched
