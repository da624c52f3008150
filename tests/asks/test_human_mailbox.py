"""`looop wait` returns within a second of a new ask; `tell`/`told` round-trip in a real worker."""

from __future__ import annotations

import subprocess
import sys
import time

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for


def test_wait_only_asks_returns_within_a_second_of_a_new_ask(wd: Paths) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "wait", "--only-asks", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.5)  # well started and polling
        assert proc.poll() is None  # nothing needs a human yet
        asked = time.monotonic()
        mailbox.open_ask(open_wd(wd), prompt="deploy now?", asker="human", now=time.time())
        out, err = proc.communicate(timeout=10)
        took = time.monotonic() - asked
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert took < 1.0, took
    items = jsonio.loads(out)["items"]
    assert [(i["type"], i["id"], i["prompt"]) for i in items] == [("ask", "human-1", "deploy now?")]


def test_wait_times_out_with_exit_4(wd: Paths) -> None:
    r = invoke_looop("-C", str(wd.root), "wait", "--timeout", "0.3", "--json")
    assert r.returncode == 4 and "nothing needed a human" in jsonio.loads(r.stdout)["error"]


def test_tell_and_told_round_trip_in_a_real_worker(wd: Paths) -> None:
    script = (
        'until [ -s "$LOOOP_REPORTS_DIR/told.txt" ]; do\n'
        '  "$LOOOP_BIN" told >> "$LOOOP_REPORTS_DIR/told.txt"; sleep 0.1\n'
        "done\n"
        '"$LOOOP_BIN" done --summary "heard: $(cat "$LOOOP_REPORTS_DIR/told.txt")"\n'
    )
    env = {"LOOOP_BIN": f"{sys.executable} -m looop_py"}
    started = invoke_looop("-C", str(wd.root), "worker", "start", "w1", "-", input=script, env=env)
    assert started.returncode == 0, started.stderr
    told = invoke_looop("-C", str(wd.root), "tell", "w1", "use the staging DB", "--json")
    assert told.returncode == 0, told.stderr
    wait_for((wd.sessions / "w1" / "result.json").exists, 20, "the worker's result")
    result = jsonio.read_json(wd.sessions / "w1" / "result.json")
    assert "heard: use the staging DB" in result["summary"]
    seen = invoke_looop("-C", str(wd.root), "workers", "--all", "--json")
    assert seen.returncode == 0
    again = invoke_looop("-C", str(wd.root), "told", "--worker", "w1", "--json")
    assert jsonio.loads(again.stdout)["messages"] == []  # each message is read once
    assert (wd.sessions / "w1" / "inbox" / "read").is_dir()
