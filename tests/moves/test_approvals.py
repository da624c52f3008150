"""Approvals run exactly what the ask showed, once, durably: by `looop approve` or the next beat."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from looop_py import jsonio
from looop_py.asks import mailbox, seal
from looop_py.beat.pulse import beat
from looop_py.locks import PulseLock
from looop_py.moves import approvals, gate, union
from looop_py.workdir import journal, provenance
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for

LOOP = "---\nintent: keep ci green\nlevel: L2-assisted\nmaker: make fix\ncadence: every 1h\n---\n"


def held(wd: Paths, move: dict[str, Any]) -> mailbox.Ask:
    admission = gate.admit(open_wd(wd), union.parse(move), time.time())
    assert admission.held is not None, admission
    return mailbox.get_ask(open_wd(wd), admission.held)


def test_an_approved_goal_is_written_exactly_as_the_diff_showed(wd: Paths) -> None:
    (wd.goals / "ci.md").write_text(LOOP)
    new = LOOP.replace("L2-assisted", "L3-unattended")
    ask = held(wd, {"action": "write_goal", "id": "ci", "body": new})
    assert "-level: L2-assisted" in ask.prompt and "+level: L3-unattended" in ask.prompt
    assert (wd.goals / "ci.md").read_text() == LOOP  # nothing written before approval
    r = invoke_looop("-C", str(wd.root), "approve", ask.id)
    assert r.returncode == 0, r.stderr
    assert (wd.goals / "ci.md").read_text() == new
    data = (wd.goals / "ci.md").read_bytes()
    assert not provenance.written_by_model(wd, "goals/ci.md", data)  # approved: the file's own
    assert "✓ approved decider-1: write-goal ci · ran" in journal.tail(wd, 1)[0]


def test_an_approval_whose_file_changed_meanwhile_is_refused_as_stale(wd: Paths) -> None:
    ask = held(wd, {"action": "write_sensor", "name": "ci", "script": "echo model"})
    (wd.sensors / "ci.sh").write_text("#!/bin/sh\necho human\n")  # someone edits it meanwhile
    r = invoke_looop("-C", str(wd.root), "approve", ask.id)
    assert r.returncode == 2 and "stale" in r.stderr and "sensors/ci.sh changed" in r.stderr
    assert (wd.sensors / "ci.sh").read_text() == "#!/bin/sh\necho human\n"
    answer = mailbox.get_answer(open_wd(wd), ask.id)
    assert answer is not None and answer.verdict == "stale"
    assert "refused as stale" in journal.tail(wd, 1)[0]
    assert not mailbox.pending(open_wd(wd))


def test_an_approval_whose_command_changed_meanwhile_is_refused_as_stale(wd: Paths) -> None:
    ask = held(wd, {"action": "run_shell", "cmd": "echo hi"})
    hold = dict(ask.hold)
    hold["move"] = {"action": "run_shell", "cmd": "echo hi; touch x"}  # an edited ask file
    assert approvals.stale_reason(open_wd(wd), hold) is not None
    assert approvals.stale_reason(open_wd(wd), ask.hold) is None


def test_an_approved_shell_worker_runs_its_prompt(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "worked"
    ask = held(wd, {"action": "start_worker", "id": "w", "prompt": f"touch {marker}"})
    assert f"touch {marker}" in ask.prompt and "runtime shell" in ask.prompt
    assert invoke_looop("-C", str(wd.root), "approve", ask.id).returncode == 0
    wait_for(marker.exists, 20, "the approved worker")


def test_a_lock_held_too_long_leaves_the_approval_to_the_next_beat(
    wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "count"
    ask = held(wd, {"action": "run_shell", "cmd": f"echo x >> {marker}"})
    monkeypatch.setattr(approvals, "LOCK_WAIT_S", 0.2)
    lock = PulseLock(wd.pulse_lock)
    assert lock.acquire()
    try:
        got = approvals.approve(open_wd(wd), ask.id, now=time.time())
    finally:
        lock.release()
    assert got.note == approvals.QUEUED and not marker.exists()
    assert "queued for the next beat" in journal.tail(wd, 1)[0]
    with pytest.raises(Exception, match="already"):
        approvals.approve(open_wd(wd), ask.id, now=time.time())
    beat(open_wd(wd))
    beat(open_wd(wd), force=True)
    assert marker.read_text() == "x\n"  # once
    answer = mailbox.get_answer(open_wd(wd), ask.id)
    assert answer is not None and answer.note == "ran: exit 0"


def test_killing_approve_while_it_waits_for_the_lock_still_runs_it_once(
    wd: Paths, tmp_path: Path
) -> None:
    marker = tmp_path / "count"
    ask = held(wd, {"action": "run_shell", "cmd": f"echo x >> {marker}"})
    lock = PulseLock(wd.pulse_lock)
    assert lock.acquire()
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "approve", ask.id],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def waiting() -> bool:
            got = mailbox.get_answer(open_wd(wd), ask.id)
            return got is not None and got.note == approvals.WAITING

        wait_for(waiting, 20, "approve to record the approval and wait for the lock")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        lock.release()
    assert not marker.exists()  # it died before it ran anything
    r = invoke_looop("-C", str(wd.root), "pulse", "--json")
    assert r.returncode == 0, r.stderr
    assert marker.read_text() == "x\n"
    invoke_looop("-C", str(wd.root), "pulse", "--force")
    assert marker.read_text() == "x\n"  # exactly once
    assert any(
        f"✓ approved {ask.id}: run-shell" in line and "ran: exit 0" in line
        for line in journal.tail(wd, 10)
    )
    carried = [e for e in journal.recent_events(wd) if e.get("event") == "approval_carried_out"]
    assert len(carried) == 1 and carried[0]["by"] == "pulse" and carried[0]["ok"] is True
    assert not list(wd.approved.glob("*.json"))


def test_an_approval_interrupted_mid_run_is_reported_never_rerun(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "count"
    ask = held(wd, {"action": "run_shell", "cmd": f"echo x >> {marker}"})
    wd.approved.mkdir(parents=True, exist_ok=True)
    intent = {
        "v": 2,
        "ask": ask.id,
        "hold": ask.hold,
        "digest": seal.digest(ask.hold),
        "seal": seal.sign(ask.id, ask.created_at, ask.asker, ask.hold),  # as approve seals it
        "state": "running",
        "pid": 1,
    }
    jsonio.write_json(wd.approved / f"{ask.id}.json", intent)  # its actor died mid-move
    beat(open_wd(wd))
    assert not marker.exists()
    assert any(f"approved {ask.id}" in ln and "interrupted" in ln for ln in journal.tail(wd, 5))
    answer = mailbox.get_answer(open_wd(wd), ask.id)
    assert answer is not None and (answer.note or "").startswith("interrupted")


def test_a_denial_racing_an_approval_wins_and_nothing_runs(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "never"
    ask = held(wd, {"action": "run_shell", "cmd": f"touch {marker}"})
    wd.approved.mkdir(parents=True, exist_ok=True)
    intent = {"v": 1, "ask": ask.id, "hold": ask.hold, "state": "approved"}
    jsonio.write_json(wd.approved / f"{ask.id}.json", intent)  # approve died before answering
    mailbox.answer(open_wd(wd), ask.id, "denied", now=time.time(), verdict="denied")
    beat(open_wd(wd))
    assert not marker.exists() and not list(wd.approved.glob("*.json"))
