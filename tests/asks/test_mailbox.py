"""The human mailbox with real processes: ask blocks, answer releases it, approvals run once."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.errors import UsageError
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for


def test_ask_blocks_until_answered_and_prints_only_the_answer(wd: Paths) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "ask", "--prompt", "Deploy?"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**__import__("os").environ, "LOOOP_SESSION_ID": "w7"},
    )
    wait_for(
        lambda: mailbox.pending(open_wd(wd)) or proc.poll() is not None,
        20,
        "the ask",
        interval=0.05,
    )
    (ask,) = mailbox.pending(open_wd(wd))
    assert ask.id == "w7-1" and ask.asker == "w7"
    assert proc.poll() is None  # still blocked: it prints below the answer given after this
    r = invoke_looop("-C", str(wd.root), "answer", "w7-1", "ship it\nwith care")
    assert r.returncode == 0, r.stderr
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert out == "ship it\nwith care\n"
    assert "waiting for an answer" in err


def test_answer_from_stdin_and_only_once(wd: Paths) -> None:
    ask = mailbox.open_ask(open_wd(wd), prompt="q", asker="human", now=time.time())
    assert (
        invoke_looop("-C", str(wd.root), "answer", ask.id, "-", input="from stdin\n").returncode
        == 0
    )
    assert mailbox.get_answer(open_wd(wd), ask.id).text == "from stdin"  # type: ignore[union-attr]
    again = invoke_looop("-C", str(wd.root), "answer", ask.id, "other")
    assert again.returncode == 2 and "already answered" in again.stderr
    assert invoke_looop("-C", str(wd.root), "answer", ask.id, "other", "--force").returncode == 0


def test_options_are_enforced(wd: Paths) -> None:
    ask = mailbox.open_ask(
        open_wd(wd), prompt="q", asker="human", now=time.time(), options=("a", "b")
    )
    with pytest.raises(UsageError, match="one of: a, b"):
        mailbox.answer(open_wd(wd), ask.id, "c", now=time.time())


def test_ask_times_out_with_exit_4_and_stays_pending(wd: Paths) -> None:
    r = invoke_looop("-C", str(wd.root), "ask", "--prompt", "anyone?", "--timeout", "0.3")
    assert r.returncode == 4 and r.stdout == ""
    assert [a.id for a in mailbox.pending(open_wd(wd))] == ["human-1"]


def test_concurrent_askers_get_distinct_ids(wd: Paths) -> None:
    ids: list[str] = []
    lock = threading.Lock()

    def one() -> None:
        a = mailbox.open_ask(open_wd(wd), prompt="q", asker="w", now=time.time())
        with lock:
            ids.append(a.id)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 20


def held(wd: Paths, move: dict) -> mailbox.Ask:
    """A move the gate held back, as the pulse would hold it."""
    from looop_py.moves import gate, union

    admission = gate.admit(open_wd(wd), union.parse(move), time.time())
    assert admission.held is not None
    return mailbox.get_ask(open_wd(wd), admission.held)


def test_approve_runs_the_held_move_once(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "count"
    ask = held(wd, {"action": "run_shell", "cmd": f"echo x >> {marker}"})
    assert f"echo x >> {marker}" in ask.prompt
    r = invoke_looop("-C", str(wd.root), "approve", ask.id)
    assert r.returncode == 0, r.stderr
    assert marker.read_text() == "x\n"
    again = invoke_looop("-C", str(wd.root), "approve", ask.id)
    assert again.returncode == 2 and marker.read_text() == "x\n"
    answered = jsonio.read_json(wd.answers / f"{ask.id}.json")
    assert answered["verdict"] == "approved" and answered["note"].startswith("ran")
    assert "approved decider-1" in wd.journal.read_text()


def test_deny_runs_nothing(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "never"
    ask = held(wd, {"action": "run_shell", "cmd": f"touch {marker}"})
    r = invoke_looop("-C", str(wd.root), "deny", ask.id, "--reason", "not today")
    assert r.returncode == 0
    assert not marker.exists()
    assert "denied decider-1" in wd.journal.read_text() and "not today" in wd.journal.read_text()
    assert invoke_looop("-C", str(wd.root), "approve", ask.id).returncode == 2


def test_a_question_cannot_be_approved_and_an_approval_cannot_be_answered(wd: Paths) -> None:
    q = mailbox.open_ask(open_wd(wd), prompt="q", asker="human", now=time.time())
    assert "is a question" in invoke_looop("-C", str(wd.root), "approve", q.id).stderr
    a = mailbox.open_ask(
        open_wd(wd),
        prompt="run?",
        asker="decider",
        now=time.time(),
        kind="approval",
        hold={"move": {"action": "noop"}},
    )
    assert "is an approval" in invoke_looop("-C", str(wd.root), "answer", a.id, "yes").stderr


def test_asks_lists_pending_as_json(wd: Paths) -> None:
    mailbox.open_ask(open_wd(wd), prompt="first", asker="w1", now=time.time())
    listed = jsonio.loads(invoke_looop("-C", str(wd.root), "asks", "--json").stdout)
    assert [a["id"] for a in listed["asks"]] == ["w1-1"]


def test_asks_shows_a_stranded_ask_and_withdraw_removes_it(wd: Paths) -> None:
    # A `looop ask` that was killed while it waited leaves an ask nobody waits for.
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "ask", "--prompt", "Deploy?"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: mailbox.pending(open_wd(wd)), what="the ask to be filed")
    proc.kill()
    proc.wait()
    (filed,) = mailbox.pending(open_wd(wd))
    listed = invoke_looop("-C", str(wd.root), "asks")
    assert f"looop withdraw {filed.id}" in listed.stdout and "stranded" in listed.stdout
    as_json = jsonio.loads(invoke_looop("-C", str(wd.root), "asks", "--json").stdout)
    assert as_json["asks"][0]["state"] == "stranded"
    done = invoke_looop("-C", str(wd.root), "withdraw", filed.id, "--reason", "gone")
    assert done.returncode == 0, done.stderr
    assert invoke_looop("-C", str(wd.root), "asks").stdout.strip() == "no pending asks"


def test_an_ask_names_its_waiting_process_from_the_moment_it_exists(wd: Paths) -> None:
    # Killed right after filing, a `looop ask` must leave a stranded ask, not one that
    # looks awaited: so the very first record anyone can read already names the waiter.
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "ask", "--prompt", "Deploy?"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: list(wd.asks.glob("*.json")), what="the ask to be filed")
        (first,) = [jsonio.read_json(p) for p in wd.asks.glob("*.json")]
        assert first["waiter"]["pid"] == proc.pid
    finally:
        proc.kill()
        proc.wait()
    (view,) = mailbox.listing(open_wd(wd))
    assert view.state is mailbox.AskState.STRANDED
