"""Every state file corrupted three ways: no command crashes, and the next clean beat succeeds.

Caches under state/ are rebuilt when they do not fit; records (rounds/,
sessions/, claims/, asks/, answers/) are moved aside to corrupt/ with a journal
line and an event.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from looop_py.asks import mailbox
from looop_py.beat.preview import preview
from looop_py.beat.pulse import beat
from looop_py.errors import LooopError
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init
from tests.conftest import invoke_looop, open_wd, wait_for

LOOP = """---
intent: test the state files
level: L1
cadence: every 1h
runtime: shell
maker: |
  sleep 2
checker: |
  true
---
a loop
"""


def _rich(root: Path) -> Paths:
    """A work dir with one of every state file: a round, workers, claims, asks, ledgers."""
    from looop_py.coord import lease
    from looop_py.coord.holders import Holder
    from looop_py.identity import create_time
    from looop_py.loops.advance import start_round
    from looop_py.moves import act
    from looop_py.schedules import timers
    from looop_py.workers import launch, records

    init(root)
    p = Paths(root)
    for s in p.sensors.glob("*.sh"):
        s.unlink()
    (p.sensors / "ok.sh").write_text("#!/bin/sh\necho ok\n")
    (p.sensors / "ok.sh").chmod(0o755)
    # A backend that reads the prompt, so the prompt's own state (prompt-order.json) is
    # written and read back: noop replayed from a script (noop itself builds no prompt).
    (root / "moves.replay").write_text(json.dumps([{"action": "noop"}] * 1000))  # input
    p.config.write_text('[decider]\nbackend = "script"\nscript = "moves.replay"\n')
    p.goal("lp").write_text(LOOP)
    now = time.time()
    start_round(open_wd(p), "lp", now=now, trigger="test")
    launch.start(open_wd(p), "w1", "exit 0", now=now)
    lease.claim(p, "tgt", Holder("x", os.getpid(), create_time(os.getpid())), now=now)
    mailbox.open_ask(open_wd(p), prompt="q?", asker="human", now=now)
    answered = mailbox.open_ask(open_wd(p), prompt="q2?", asker="human", now=now)
    mailbox.answer(open_wd(p), answered.id, "yes", now=now)
    timers.write(open_wd(p), "tick", now=now, every_s=3600)
    act.stamp_goal(open_wd(p), "lp", now)
    wait_for(
        lambda: not records.get(open_wd(p), "w1", time.time()).alive, 10, "w1 to end", interval=0.05
    )
    records.report(p, "w1", status="done", summary="s", tokens=None, cost_usd=None, now=now)
    assert beat(open_wd(p)).outcome == "decided"
    assert beat(open_wd(p), force=True).outcome == "decided"
    for name, body in {
        "rules-pending.json": {"v": 1, "pending": ["lp"]},
        "backoff.json": {"v": 1, "fails": 1, "at": 1.0, "policy": None, "reason": "x"},
        "spend.json": {"v": 1, "day": "2020-01-01", "tokens": 1, "usd": 0.5, "unmetered": 0},
        "wal.json": {"v": 1, "move": {"action": "noop"}, "started_at": 1.0, "pid": 1},
        "last-shell.json": {"cmd": "true", "exit_code": 0, "output": ""},
    }.items():
        (p.state / name).write_text(json.dumps(body))
    p.memory.mkdir(exist_ok=True)
    (p.memory / "lp.jsonl").write_text('{"round": "r", "outcome": "reported", "at": 1.0}\n')
    return p


def _copy(src: Path, dst: Path) -> None:
    """The rich work dir as it is now: its loop round's maker may still be running, and a
    temp file it is about to rename can vanish mid-copy, so temp files are left out."""
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".*.tmp"))


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    return _rich(tmp_path_factory.mktemp("rich") / "wd")


def _state_files(p: Paths) -> list[str]:
    skip = ("snapshots/", "runs/", "goals/", "sensors/", "reports/", "PLAYBOOK")
    return sorted(
        str(f.relative_to(p.root))
        for f in p.root.rglob("*")
        if f.is_file()
        and f.suffix in (".json", ".jsonl", ".md", ".log")
        and not str(f.relative_to(p.root)).startswith(skip)
    )


def _swap(x: Any) -> Any:
    if isinstance(x, bool):
        return "yes"
    if isinstance(x, int | float):
        return "7"
    if isinstance(x, str):
        return 7
    if isinstance(x, list):
        return {"a": [1]}
    if isinstance(x, dict):
        return [1, 2]
    return {"z": 1}


def wrong_shape(data: bytes) -> bytes:
    """Valid JSON of the wrong shape: every field (and every line of a .jsonl) retyped."""
    lines = data.splitlines() or [b"{}"]
    out = []
    for line in lines:
        try:
            value = json.loads(line)
        except ValueError:
            value = {"x": 1}
        if isinstance(value, dict):
            value = {k: _swap(v) for k, v in value.items()} or [1]
        else:
            value = {"unexpected": value}
        out.append(json.dumps(value).encode())
    return b"\n".join(out) + b"\n"


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda b: b[: max(1, len(b) // 2)],
    "garbage": lambda b: b"\x00\xff\xfe garbage {{{ \x80",
    "wrong-shape": wrong_shape,
}

STATE_FILES = [
    "answers/*.json",
    "asks/*.json",
    "claims/loop-lp.json",
    "claims/tgt.json",
    "events.jsonl",
    "journal.md",
    "memory/lp.jsonl",
    "rounds/*.json",
    "sessions/*.maker/meta.json",
    "sessions/*.maker/status.json",
    "sessions/w1/meta.json",
    "sessions/w1/status.json",
    "sessions/w1/result.json",
    "sessions/w1/output.log",
    "state/config-cache.json",
    "state/decides.json",
    "state/flap.json",
    "state/prompt-order.json",
    "state/goal-activity.json",
    "state/last-world.json",
    "state/loop-schedule.json",
    "state/loops-index.json",
    "state/goals-cache.json",
    "state/goals-seen.bin",
    "state/rules-pending.json",
    "state/backoff.json",
    "state/spend.json",
    "state/wal.json",
    "state/last-shell.json",
    "state/schedules/tick.json",
    "state/records-checked.json",
    "state/retention.json",
    "state/script-cursor.json",
]


def test_the_list_covers_every_state_file(rich: Paths) -> None:
    listed = {str(f.relative_to(rich.root)) for g in STATE_FILES for f in rich.root.glob(g)}
    present = set(_state_files(rich))
    ignorable = {
        f
        for f in present
        if f.endswith(("prompt.md", "supervisor.log", "errors.log", "output.log"))
    }
    assert present - ignorable <= listed, sorted(present - ignorable - listed)


def _views(p: Paths) -> dict[str, Callable[[], object]]:
    from looop_py.beat import views
    from looop_py.coord import reaper
    from looop_py.loops.views import list_rounds, overview
    from looop_py.workers import records

    now = time.time()
    return {
        "sense": lambda: preview(open_wd(p)),
        "status": lambda: views.status(open_wd(p)),
        "why": lambda: views.why(open_wd(p)),
        "loops": lambda: overview(open_wd(p), now),
        "rounds": lambda: list_rounds(open_wd(p), include_done=True),
        "workers": lambda: records.list_sessions(open_wd(p), now),
        "claims": lambda: reaper.list_claims(p, now),
        "asks": lambda: mailbox.pending(open_wd(p)),
        "journal": lambda: journal.tail(p, 20),
    }


@pytest.mark.slow
@pytest.mark.parametrize("how", list(CORRUPTIONS))
@pytest.mark.parametrize("pattern", STATE_FILES)
def test_a_corrupt_state_file_never_crashes_a_command(
    rich: Paths, tmp_path: Path, pattern: str, how: str
) -> None:
    root = tmp_path / "wd"
    _copy(rich.root, root)
    p = Paths(root)
    targets = list(root.glob(pattern))
    assert targets, pattern
    for target in targets:
        target.write_bytes(CORRUPTIONS[how](target.read_bytes()))
    # The beat never fails because of a state file, and the one after it is clean.
    for _ in range(2):
        result = beat(open_wd(p), force=True)
        assert result.outcome in ("decided", "skipped"), result
    for name, view in _views(p).items():
        try:
            view()
        except LooopError as exc:  # a readable error with an exit code 1..4 is fine
            assert 1 <= exc.exit_code <= 4, (name, exc)
    assert not p.error_log.exists() or "Traceback" not in p.error_log.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("how", list(CORRUPTIONS))
def test_every_file_corrupt_at_once_every_command_exits_0_to_4(
    rich: Paths, tmp_path: Path, how: str
) -> None:
    root = tmp_path / "wd"
    _copy(rich.root, root)
    for pattern in STATE_FILES:
        for target in root.glob(pattern):
            target.write_bytes(CORRUPTIONS[how](target.read_bytes()))
    for args in (
        ["pulse"],
        ["sense"],
        ["status"],
        ["why"],
        ["loops"],
        ["rounds", "--all"],
        ["workers", "--all"],
        ["claims"],
        ["asks"],
        ["journal"],
        ["status", "--json"],
        ["schedules"],
        ["doctor", "--offline"],
    ):
        out = invoke_looop("-C", str(root), *args)
        assert 0 <= out.returncode <= 4, (args, out.returncode, out.stderr)
        assert "Traceback" not in out.stderr
    out = invoke_looop("-C", str(root), "pulse", "--force")
    assert out.returncode == 0, out.stderr
    last = journal.last_event(Paths(root), "beat")
    assert last is not None and last["outcome"] in ("decided", "skipped")


def test_misfit_records_are_moved_aside_with_a_journal_line_and_an_event(
    rich: Paths, tmp_path: Path
) -> None:
    root = tmp_path / "wd"
    _copy(rich.root, root)
    p = Paths(root)
    (p.asks / "human-1.json").write_text('{"id": 5}')
    (p.sessions / "w1" / "meta.json").write_text('{"pid": "not a pid"}')
    next(p.rounds.glob("*.json")).write_text("[1, 2")
    (p.claims / "tgt.json").write_text("[]")
    assert beat(open_wd(p)).outcome in ("decided", "skipped")
    moved = {e["path"] for e in journal.recent_events(p) if e["event"] == "record_set_aside"}
    assert {"asks/human-1.json", "sessions/w1", "claims/tgt.json"} <= moved
    assert any(m.startswith("rounds/") for m in moved)
    corrupt = root / "corrupt"
    assert (corrupt / "sessions").is_dir() and list((corrupt / "asks").iterdir())
    assert not (p.sessions / "w1").exists()
    lines = journal.tail(p, 20)
    assert any("moved asks/human-1.json aside" in line for line in lines)
    assert beat(open_wd(p), force=True).outcome == "decided"  # and the next beat is clean


def test_a_wrongly_shaped_loops_index_is_rebuilt(rich: Paths, tmp_path: Path) -> None:
    root = tmp_path / "wd"
    _copy(rich.root, root)
    p = Paths(root)
    for bad in ('{"goals": [1, 2]}', '["x"]', '{"goals": {"lp": 5}}', '{"goals": "lp"}'):
        p.loops_index.write_text(bad)
        assert beat(open_wd(p), force=True).outcome == "decided"
        assert json.loads(p.loops_index.read_text())["goals"]["lp"]["loop"] is True


def test_missing_record_dirs_do_not_stop_a_beat(rich: Paths, tmp_path: Path) -> None:
    root = tmp_path / "wd"
    _copy(rich.root, root)
    p = Paths(root)
    for d in (p.rounds, p.sessions, p.claims, p.asks, p.answers, p.memory, p.snapshots):
        shutil.rmtree(d)
    assert beat(open_wd(p), force=True).outcome == "decided"
    events = journal.recent_events(p, 50)
    assert not [e for e in events if str(e.get("event", "")).endswith("_failed")], events
    out = invoke_looop("-C", str(root), "run", "lp", "--json")
    assert out.returncode in (0, 1), out.stderr
