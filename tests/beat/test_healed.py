"""A "these sensors just started failing" ask closes once its sensors read again, seen as the
user sees it: `looop asks`, the journal, the answer on record."""

from __future__ import annotations

from pathlib import Path

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, write_sensor


def _pulse(wd: Paths) -> None:
    r = invoke_looop("-C", str(wd.root), "pulse")
    assert r.returncode == 0, r.stderr


def _asks(wd: Paths) -> list[dict[str, object]]:
    return jsonio.loads(invoke_looop("-C", str(wd.root), "asks", "--json").stdout)["asks"]


def _breakable(wd: Paths, name: str) -> Path:
    flag = wd.root / f"{name}-ok"
    flag.write_text("1")
    write_sensor(wd, name, f"[ -s {flag} ] && echo fine || {{ echo dead >&2; exit 3; }}")
    return flag


def test_a_broken_sensor_ask_is_withdrawn_when_they_all_recover(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    a, b = _breakable(wd, "alpha"), _breakable(wd, "beta")
    _pulse(wd)  # baseline: healthy
    mailbox.open_ask(open_wd(wd), prompt="Ship it today?", asker="human", now=0.0)
    a.write_text("")
    b.write_text("")
    _pulse(wd)
    broken = [x for x in _asks(wd) if str(x["prompt"]).startswith("These sensors")]
    assert len(broken) == 1 and "alpha" in str(broken[0]["prompt"])
    a.write_text("1")  # one of the two heals: the ask stays
    _pulse(wd)
    assert [x["id"] for x in _asks(wd)].count(broken[0]["id"]) == 1
    b.write_text("1")  # both read again: the ask closes itself
    _pulse(wd)
    ids = [x["id"] for x in _asks(wd)]
    assert broken[0]["id"] not in ids and len(ids) == 1  # the human's question stays
    answer = mailbox.get_answer(open_wd(wd), str(broken[0]["id"]))
    assert answer is not None and answer.verdict == "withdrawn"
    assert answer.note == "the sensors recovered: alpha, beta"
    lines = journal.tail(wd, 5)
    assert any(f"withdrew {broken[0]['id']}: sensors recovered (alpha, beta)" in ln for ln in lines)


def test_an_answered_broken_sensor_ask_is_left_alone(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    flag = _breakable(wd, "alpha")
    _pulse(wd)
    flag.write_text("")
    _pulse(wd)
    (ask,) = _asks(wd)
    assert invoke_looop("-C", str(wd.root), "answer", str(ask["id"]), "fixed").returncode == 0
    flag.write_text("1")
    _pulse(wd)
    answer = mailbox.get_answer(open_wd(wd), str(ask["id"]))
    assert answer is not None and answer.text == "fixed"  # the human's answer stands
