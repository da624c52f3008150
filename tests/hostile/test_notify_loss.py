"""Notifications are never lost silently: a big event, a failing hook, a hook that dies.

Each variant runs real beats with a real hook and looks at what the hook received.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from looop_py.asks import mailbox
from looop_py.beat.pulse import beat
from looop_py.moves import gate, union
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, write_sensor


def _hook(wd: Paths, command: str) -> None:
    wd.config.write_text(wd.config.read_text() + f"\n[notify]\ncommand = '''{command}'''\n")


def _heard(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    return [json.loads(ln) for ln in log.read_text().splitlines() if ln.strip()]


def test_an_approval_bigger_than_the_kernels_variable_limit_is_heard(
    wd: Paths, tmp_path: Path
) -> None:
    """A 300 KiB goal rewrite: LOOOP_EVENT_JSON whole would be E2BIG; stdin carries it."""
    log, env_log = tmp_path / "heard.jsonl", tmp_path / "env.txt"
    _hook(wd, f'cat >> {log}; echo >> {log}; printf %s "$LOOOP_EVENT_JSON" | wc -c >> {env_log}')
    write_sensor(wd, "s", "echo 1")
    body = "---\nintent: x\nmaker: make fix\nlevel: L2-assisted\ncadence: every 1h\n---\n"
    body += '"' * 64_000 + "\n"  # each escaped in JSON: twice the bytes
    held = gate.admit(
        open_wd(wd), union.parse({"action": "write_goal", "id": "big", "body": body}), 1.0
    )
    assert held.held is not None
    hold = mailbox.get_ask(open_wd(wd), held.held).hold
    hold_size = len(json.dumps(hold))
    assert hold_size > 128 * 1024
    beat(open_wd(wd))
    events = _heard(log)
    assert [e["id"] for e in events] == [held.held]
    assert events[0]["hold"] == hold  # the whole event on stdin
    assert int(env_log.read_text().split()[0]) <= 16 * 1024  # the summary is bounded
    beat(open_wd(wd))
    assert len(_heard(log)) == 1  # and once


def test_a_failing_hook_is_retried_until_it_succeeds_and_status_shows_it(
    wd: Paths, tmp_path: Path
) -> None:
    log, gate_file = tmp_path / "heard.jsonl", tmp_path / "up"
    _hook(wd, f"test -e {gate_file} || exit 7; cat >> {log}; echo >> {log}")
    write_sensor(wd, "s", "echo 1")
    mailbox.open_ask(open_wd(wd), prompt="merge?", asker="human", now=time.time())
    beat(open_wd(wd))
    beat(open_wd(wd))
    assert _heard(log) == []
    status = invoke_looop("-C", str(wd.root), "status")
    assert "1 event(s) not delivered" in status.stderr, status.stderr
    js = invoke_looop("-C", str(wd.root), "status", "--json")
    assert json.loads(js.stdout)["notify_failing"] == 1
    gate_file.touch()  # the phone's service is back
    beat(open_wd(wd))
    assert [e["id"] for e in _heard(log)] == ["human-1"]
    beat(open_wd(wd))
    assert len(_heard(log)) == 1
    assert "not delivered" not in invoke_looop("-C", str(wd.root), "status").stderr


def test_a_hook_killed_mid_event_is_tried_again(wd: Paths, tmp_path: Path) -> None:
    log, once = tmp_path / "heard.jsonl", tmp_path / "once"
    _hook(wd, f"if [ ! -e {once} ]; then touch {once}; kill -9 $$; fi; cat >> {log}")
    write_sensor(wd, "s", "echo 1")
    mailbox.open_ask(open_wd(wd), prompt="merge?", asker="human", now=time.time())
    beat(open_wd(wd))
    assert once.exists() and _heard(log) == []
    beat(open_wd(wd))
    assert [e["id"] for e in _heard(log)] == ["human-1"]


def test_hidden_characters_reach_the_hook_spelled_out(wd: Paths, tmp_path: Path) -> None:
    env_log = tmp_path / "text.txt"
    _hook(wd, f'printf %s "$LOOOP_EVENT_TEXT" >> {env_log}')
    write_sensor(wd, "s", "echo 1")
    mailbox.open_ask(
        open_wd(wd), prompt="ok?\x1b[2K\rall fine \u202etxt.exe", asker="human", now=time.time()
    )
    beat(open_wd(wd))
    text = env_log.read_text()
    assert "\x1b" not in text and "\r" not in text and "\u202e" not in text
    assert "\\x1b[2K\\x0dall fine ⟨U+202E⟩txt.exe" in text
