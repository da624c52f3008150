"""The WorkDir: built once at the door, passed down, and nothing below rediscovers it.

A test builds one over any shelf and a fixed clock and calls the core directly; each door
loads looop.toml once; a long-lived door follows edits; a work dir configured to share
never falls back to local files; and no module keeps state of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

from looop_py.asks import mailbox
from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome
from looop_py.cli.app import cli
from looop_py.coord.choose import Reopening, open_workdir
from looop_py.errors import ConfigError, Unavailable
from looop_py.spend import ledger
from looop_py.workdir import config as config_mod
from looop_py.workdir import journal
from looop_py.workdir.config import Config
from looop_py.workdir.context import Memo, WorkDir
from looop_py.workdir.paths import Paths
from tests.etcdserver import free_port
from tests.memshelf import MemoryShelf

PACKAGE = Path(__file__).resolve().parents[2] / "looop_py"
FIXED = 1_800_000_000.0


def memory_workdir(tmp_path: Path) -> tuple[WorkDir, MemoryShelf]:
    box = MemoryShelf()
    return WorkDir(Paths(tmp_path / "nowhere"), Config(), box, lambda: FIXED), box


# -- the core, called directly -------------------------------------------------------------


def test_asks_live_on_the_shelf_the_workdir_carries_and_nowhere_else(tmp_path: Path) -> None:
    wd, box = memory_workdir(tmp_path)
    ask = mailbox.open_ask(wd, prompt="ship it?", asker="decider", now=wd.clock())
    assert [a.id for a in mailbox.pending(wd)] == [ask.id]
    mailbox.answer(wd, ask.id, "yes", now=wd.clock())
    assert mailbox.pending(wd) == []
    assert mailbox.get_answer(wd, ask.id).text == "yes"  # type: ignore[union-attr]
    assert {kind for kind, _ in box.records} == {"asks", "answers"}
    assert not (tmp_path / "nowhere").exists()  # not one file was written


def test_the_spend_ledger_charges_once_on_any_shelf(tmp_path: Path) -> None:
    wd, _ = memory_workdir(tmp_path)
    charge = ledger.Charge(key="run-1", source="decider", tokens=120, usd=0.01)
    ledger.record_charge(wd, FIXED, charge)
    ledger.record_charge(wd, FIXED, charge)  # the same key again: charged once
    spend = ledger.load(wd)
    assert (spend.tokens, spend.usd) == (120, 0.01)


def test_a_beat_reads_now_from_the_workdirs_clock(wd: Paths) -> None:
    opened = open_workdir(wd, clock=lambda: FIXED)
    result = beat(opened, force=True)
    assert result.outcome is BeatOutcome.DECIDED
    (event,) = [e for e in journal.recent_events(wd) if e.get("event") == "beat"]
    assert event["ts"] == journal.iso(FIXED)


def test_memo_keeps_a_value_while_its_stamp_holds_and_scopes_nest() -> None:
    memo, calls = Memo(), []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    assert memo.keep("k", (1,), compute) == memo.keep("k", (1,), compute) == 1
    assert memo.keep("k", (2,), compute) == 2  # the file changed: worked out again
    assert memo.once("x", compute) == 3 and memo.once("x", compute) == 4  # no scope: afresh
    with memo.scope():
        assert memo.once("x", compute) == memo.once("x", compute) == 5
        with memo.scope():
            assert memo.once("x", compute) == 5  # a nested block shares its scope
    assert memo.once("x", compute) == 6


# -- the doors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["pulse", "--force"], ["status"], ["asks", "--json"], ["why"], ["loops"], ["workers"]],
)
def test_each_command_loads_looop_toml_once(
    wd: Paths, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    loads: list[Path] = []
    real = config_mod.load

    def counting(path: Path, *rest: object, **kw: object) -> Config:
        loads.append(path)
        return real(path, *rest, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(config_mod, "load", counting)
    result = CliRunner().invoke(cli, ["-C", str(wd.root), *args])
    assert result.exit_code in (0, 1), result.output
    assert loads == [wd.config]


def test_a_long_lived_door_follows_edits_to_looop_toml(wd: Paths) -> None:
    opened = Reopening(wd)
    first = opened.current()
    assert opened.current() is first  # unchanged: the same WorkDir, its memo kept
    wd.config.write_text('[decider]\nbackend = "noop"\n\n[limits]\nnoop_ttl_s = 60\n')
    second = opened.current()
    assert second is not first and second.config.limits.noop_ttl_s == 60
    wd.config.write_text("[limits]\nnoop_ttl_s = 'soon'\n")
    with pytest.raises(ConfigError):
        opened.current()  # a bad edit is said so, as a new command would say it
    opened.close()


def test_a_workdir_configured_to_share_never_falls_back_to_files(wd: Paths) -> None:
    """etcd named in looop.toml but nothing answering there: the shelf is etcd's, a read
    is Unavailable naming the endpoint, and not one record is read or written locally."""
    wd.config.write_text(
        '[decider]\nbackend = "noop"\n\n[coordination]\nbackend = "etcd"\n'
        f'endpoints = ["http://127.0.0.1:{free_port()}"]\nprefix = "/looop/t"\ntimeout_s = 1\n'
    )
    opened = open_workdir(wd)
    try:
        assert opened.shelf.backend == "etcd"
        with pytest.raises(Unavailable, match=r"127\.0\.0\.1"):
            opened.shelf.names("asks")
        with pytest.raises(Unavailable):
            opened.shelf.put("asks", "a1", b"{}")
    finally:
        opened.close()
    assert not any(wd.asks.iterdir())


# -- no state of its own ---------------------------------------------------------------------


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text())) for p in sorted(PACKAGE.rglob("*.py"))]


# The one exception: the process groups this process has running now. They belong to the
# process (a signal handler, or the beat's `finally`, ends them all), not to a work dir.
PROCESS_STATE = {"procs.py:RUNNING"}


def test_no_module_keeps_a_cache_or_registry_of_its_own() -> None:
    """Module-level containers that start empty are caches or registries filled at run
    time; they belong on the object that owns them (the WorkDir, a door)."""
    found = []
    for path, tree in _modules():
        for node in tree.body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            empty = isinstance(value, ast.Dict | ast.List | ast.Set) and not (
                value.keys if isinstance(value, ast.Dict) else value.elts
            )
            called = (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id in ("dict", "list", "set")
            )
            target = (
                node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            )
            name = f"{path.relative_to(PACKAGE)}:{getattr(target, 'id', '?')}"
            if (empty or called) and name not in PROCESS_STATE:
                found.append(f"{name} (line {node.lineno})")
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} global")
            if isinstance(node, ast.Attribute) and node.attr == "register_at_fork":
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} register_at_fork")
    assert found == []


def test_nothing_below_the_doors_opens_the_shelf_or_loads_the_config() -> None:
    """Only the doors (coord/choose.py `open_workdir`, and doctor, which reports a broken
    looop.toml as a check) load looop.toml; nothing looks a shelf up from a path."""
    loaders = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else ""
            if node.func.attr == "load" and name in ("config", "config_mod"):
                loaders.append(str(path.relative_to(PACKAGE)))
            assert not (node.func.attr == "of" and name in ("shelf", "shelf_mod")), path
    assert loaders == ["coord/choose.py"]
