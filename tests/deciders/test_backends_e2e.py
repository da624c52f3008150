"""Backends end to end through `looop pulse`: script replay, a fake agent CLI, the budget race."""

from __future__ import annotations

# ruff: noqa: E501 - the fake CLI prints one long stream-json line, as claude does
import os
import subprocess
import sys
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for, write_sensor


def pulse(wd: Paths, *args: str) -> dict:
    r = invoke_looop("-C", str(wd.root), "pulse", "--json", *args)
    assert r.returncode in (0, 1), r.stderr
    return jsonio.loads(r.stdout)


def test_script_backend_replays_moves_through_pulse(wd: Paths) -> None:
    moves = [
        {"action": "write_goal", "id": "from-script", "body": "# Scripted\n"},
        {"action": "ask_human", "prompt": "Is the staging DB free?", "options": ["yes", "no"]},
        {"action": "noop", "reason": "nothing else"},
    ]
    (wd.root / "moves.jsonl").write_text("\n".join(jsonio.dumps(m).decode() for m in moves))
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.jsonl"\n')
    first = pulse(wd)
    assert first["move"]["action"] == "write_goal"
    assert (wd.goals / "from-script.md").read_text() == "# Scripted\n"
    second = pulse(wd)  # the new goal changed the world
    assert second["move"]["action"] == "ask_human"
    assert [a.prompt for a in mailbox.pending(open_wd(wd))] == ["Is the staging DB free?"]
    third = pulse(wd)  # the new ask wakes the loop once
    assert third["move"] == {"action": "noop", "reason": "nothing else"}
    assert pulse(wd)["outcome"] == "skipped"
    lines = journal.tail(wd, 10)
    assert len(lines) == 3 and "write-goal from-script" in lines[0]


FAKE_CLAUDE = """#!/usr/bin/env bash
# A stand-in for `claude -p --output-format stream-json`: reads the prompt on stdin.
cat > /dev/null
printf '%s\\n' '{"type":"system","subtype":"init"}'
printf '%s\\n' '{"type":"assistant","message":{"content":[{"type":"text","text":"thinking"}]}}'
printf '%s\\n' '{"type":"result","subtype":"success","result":"```json\\n{\\"action\\": \\"noop\\", \\"reason\\": \\"from the fake cli\\"}\\n```","usage":{"input_tokens":1200,"output_tokens":80},"total_cost_usd":0.0123}'
"""


def test_command_backend_with_a_claude_style_cli_through_pulse(wd: Paths) -> None:
    cli = wd.root / "fake-claude"
    cli.write_text(FAKE_CLAUDE)
    cli.chmod(0o755)
    wd.config.write_text(f'[decider]\nbackend = "command"\ncommand = "{cli}"\n')
    beat = pulse(wd)
    assert beat["outcome"] == "decided", beat
    assert beat["move"] == {"action": "noop", "reason": "from the fake cli"}
    assert beat["decide"]["input_tokens"] == 1200 and beat["decide"]["cost_usd"] == 0.0123
    spend = jsonio.read_json(wd.state / "spend.json")
    assert spend["tokens"] == 1280 and spend["usd"] == pytest.approx(0.0123)


@pytest.mark.parametrize(
    "stdout,needle",
    [
        (b'{"action": "noop"} {"action": "run_shell", "cmd": "touch CANARY"}', "JSON"),
        (b'{"action": "noop"}\n{"action": "noop"}', "JSON"),
        (b'\xff\xfe{"action": "noop"}', "UTF-8"),
        (b"I think you should noop.", "JSON"),
        (b"", "JSON"),
    ],
)
def test_hostile_raw_output_from_a_cli_is_rejected(wd: Paths, stdout: bytes, needle: str) -> None:
    out = wd.root / "out.bin"
    out.write_bytes(stdout)
    wd.config.write_text(f'[decider]\nbackend = "command"\ncommand = "cat {out}"\n')
    beat = pulse(wd)
    assert beat["outcome"] == "failed" and needle in beat["reason"], beat["reason"]
    assert not (wd.root / "CANARY").exists()
    assert "✗" in journal.tail(wd, 1)[0]


@pytest.mark.slow
def test_budget_holds_with_twenty_racing_pulses(wd: Paths) -> None:
    """Daily token budget 1000, 300 tokens per decide, 20 processes × 5 forced pulses."""
    entry = {"move": {"action": "noop"}, "usage": {"input_tokens": 250, "output_tokens": 50}}
    (wd.root / "moves.jsonl").write_text("\n".join([jsonio.dumps(entry).decode()] * 200))
    wd.config.write_text(
        '[decider]\nbackend = "script"\nscript = "moves.jsonl"\n[limits]\ndaily_tokens = 1000\n'
    )
    racer = (
        "import subprocess, sys, time\n"
        "for _ in range(5):\n"
        f"    subprocess.run([sys.executable, '-m', 'looop_py', '-C', {str(wd.root)!r},"
        " 'pulse', '--force', '-q'])\n"
        "    time.sleep(0.01)\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", racer]) for _ in range(20)]
    for p in procs:
        assert p.wait(timeout=300) == 0
    # Locked-out racers end fast, so all of them may have run while the budget was
    # still being spent: one more pulse, alone, must be held by the budget.
    last = [sys.executable, "-m", "looop_py", "-C", str(wd.root), "pulse", "--force", "-q"]
    assert subprocess.run(last, timeout=120).returncode == 0
    spent = jsonio.read_json(wd.state / "spend.json")["tokens"]
    assert 1000 <= spent <= 1000 + 300, spent  # reached, and overshot by at most one decide
    decided = [e for e in journal.recent_events(wd, 5000) if e.get("outcome") == "decided"]
    assert len(decided) == spent // 300
    held = [e for e in journal.recent_events(wd, 5000) if e.get("outcome") == "held"]
    assert held and all("token budget" in e["reason"] for e in held)


def test_ask_from_inside_a_worker_blocks_until_answered(wd: Paths) -> None:
    script = (
        'answer=$("$LOOOP_BIN" ask --prompt "Which colour?" --options red,blue)\n'
        'printf "%s" "$answer" > reports/answer.txt\n'
        '"$LOOOP_BIN" done --summary "got $answer"\n'
    )
    r = invoke_looop("-C", str(wd.root), "worker", "start", "painter", script, "--runtime", "shell")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: mailbox.pending(open_wd(wd)), 20, "the worker's ask")
    (ask,) = mailbox.pending(open_wd(wd))
    assert ask.asker == "painter"
    health = jsonio.loads(invoke_looop("-C", str(wd.root), "workers", "--json").stdout)
    assert health["workers"][0]["health"] == "waiting-ask"
    assert invoke_looop("-C", str(wd.root), "answer", ask.id, "blue").returncode == 0
    answer = wd.reports / "answer.txt"
    result = wd.sessions / "painter" / "result.json"
    wait_for(lambda: answer.exists() and result.exists(), 30, "the answer and the result")
    assert answer.read_text() == "blue"

    def status() -> dict:
        return jsonio.read_json(wd.sessions / "painter" / "status.json")

    wait_for(lambda: status().get("state") in ("exited", "killed"), 20, "the worker to end")
    assert status()["exit_code"] == 0


def test_start_worker_move_starts_a_real_worker(wd: Path | Paths) -> None:
    assert isinstance(wd, Paths)
    entry = {
        "action": "start_worker",
        "id": "w1",
        "prompt": 'echo hi > reports/w1.txt\n"$LOOOP_BIN" done --summary ok',
        "runtime": "shell",
    }
    (wd.root / "moves.jsonl").write_text(jsonio.dumps(entry).decode())
    # A shell worker runs its prompt as bash: only a human's rule lets a model start one unasked.
    wd.config.write_text(
        '[decider]\nbackend = "script"\nscript = "moves.jsonl"\n'
        '[gates]\nallow_runtimes = ["shell"]\n'
    )
    write_sensor(wd, "s", "echo 1")
    beat = pulse(wd)
    assert beat["outcome"] == "decided", beat["reason"]
    report = wd.reports / "w1.txt"
    # the shell creates the file before echo writes to it: wait for the line, not the file
    wait_for(lambda: report.exists() and report.read_text() == "hi\n", 20, "the worker's report")
    assert os.path.exists(wd.sessions / "w1" / "meta.json")
