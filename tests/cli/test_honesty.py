"""Schedule and mailbox honesty: no silent default cadence; asks nobody waits for say so."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from looop_py.asks import mailbox
from looop_py.asks.mailbox import AskError, AskState
from looop_py.beat.pulse import beat
from looop_py.errors import NoAnswer, UsageError
from looop_py.loops.index import cadences, index
from looop_py.loops.specs import CADENCE_NOTE, goal_text
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for

NO_CADENCE = """---
intent: runs when asked
level: L1
runtime: shell
maker: |
  true
---
"""


def test_a_loop_without_cadence_runs_only_on_demand(wd: Paths) -> None:
    wd.goal("od").write_text(NO_CADENCE)
    assert index(open_wd(wd))["od"]["loop"] and cadences(index(open_wd(wd))) == {}
    out = invoke_looop("-C", str(wd.root), "loops", "--json")
    (row,) = json.loads(out.stdout)["loops"]
    assert row["cadence"] == "on demand" and row["next_fire"] is None
    day = 86400.0
    for k in range(1, 4):  # days go by: nothing fires on a schedule nobody wrote
        now = time.time() + k * day
        beat(open_wd(wd, clock=lambda now=now: now))
    assert not list(wd.rounds.glob("*.json"))


def test_looop_new_says_what_a_missing_cadence_means() -> None:
    from looop_py.engine.patterns import catalogue

    text = goal_text(catalogue()[0])
    assert CADENCE_NOTE in text and "only on demand" in text


def test_a_loop_spec_without_cadence_cannot_be_scheduled_in_process() -> None:
    from looop_py.engine.scheduler import LoopScheduler
    from looop_py.engine.spec import LoopSpec

    spec = LoopSpec.from_frontmatter("od", {"intent": "x", "level": "L1"})
    assert spec.cadence == ""

    class Engine:
        def __init__(self) -> None:
            self.spec = spec

    with pytest.raises(UsageError, match="only on demand"):
        LoopScheduler().register(Engine())  # type: ignore[arg-type]


def _ask(wd: Paths, asker: str = "human") -> mailbox.Ask:
    return mailbox.open_ask(open_wd(wd), prompt="which?", asker=asker, now=time.time())


def test_an_ask_whose_waiter_timed_out_is_expired(wd: Paths) -> None:
    ask = _ask(wd)
    with pytest.raises(NoAnswer, match="expired"):
        mailbox.wait(open_wd(wd), ask.id, timeout_s=0.05)
    (view,) = mailbox.listing(open_wd(wd))
    assert view.state is AskState.EXPIRED and "timeout" in (view.why or "")


def test_an_ask_whose_waiting_process_died_is_stranded(wd: Paths) -> None:
    code = (
        "import sys, pathlib; from looop_py.asks import mailbox;"
        "from looop_py.coord.choose import open_workdir;"
        "from looop_py.workdir.paths import Paths;"
        f"mailbox.wait(open_workdir(Paths(pathlib.Path({str(wd.root)!r}))), sys.argv[1])"
    )
    ask = _ask(wd)
    child = subprocess.Popen([sys.executable, "-c", code, ask.id])
    wait_for(
        lambda: mailbox.get_ask(open_wd(wd), ask.id).waiter, 10, "the child to wait on the ask"
    )
    assert mailbox.listing(open_wd(wd))[0].state is AskState.PENDING  # it waits
    child.kill()
    child.wait()
    (view,) = mailbox.listing(open_wd(wd))
    assert view.state is AskState.STRANDED and str(child.pid) in (view.why or "")


def test_an_ask_from_a_dead_worker_is_stranded(wd: Paths) -> None:
    d = wd.sessions / "w1"
    d.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (d / "meta.json").write_text(json.dumps({"pid": dead.pid, "create_time": 1.0}))
    _ask(wd, asker="w1")
    (view,) = mailbox.listing(open_wd(wd))
    assert view.state is AskState.STRANDED and "w1" in (view.why or "")
    snap = beat(open_wd(wd))
    assert any(c.item == "snap:sys-asks" for c in snap.changed)
    signal = json.loads(wd.snapshot("sys-asks").read_text())["signal"]
    assert signal["stranded"] == [view.ask.id]


def test_withdraw_takes_an_ask_out_and_fails_its_waiter(wd: Paths) -> None:
    ask = _ask(wd)
    mailbox.withdraw(open_wd(wd), ask.id, now=time.time(), reason="nobody needs it")
    assert mailbox.listing(open_wd(wd)) == []
    with pytest.raises(AskError, match="withdrawn: nobody needs it"):
        mailbox.wait(open_wd(wd), ask.id, timeout_s=1)
    with pytest.raises(UsageError, match="already answered"):
        mailbox.withdraw(open_wd(wd), ask.id, now=time.time())
    with pytest.raises(UsageError):
        mailbox.withdraw(open_wd(wd), "no-such-1", now=time.time())


def test_the_cli_ask_timeout_leaves_an_expired_ask(wd: Paths) -> None:
    out = invoke_looop("-C", str(wd.root), "ask", "--prompt", "q?", "--timeout", "0.2")
    assert out.returncode == 4, out.stderr
    (view,) = mailbox.listing(open_wd(wd))
    assert view.state is AskState.EXPIRED
    out = invoke_looop("-C", str(wd.root), "asks", "--json")
    assert out.returncode == 0
