"""The fence reaches what a beat hands on: a notification and a round's action are not
carried out once the pulse is lost (journaled "decided X, not acted: lost the pulse at
token T"), and a worker carries LOOOP_FENCE so its own writes can ask `looop fence
check` — held while its host holds the pulse, lost (exit 4) once it is handed over.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py.beat import notify
from looop_py.coord import choose
from looop_py.coord.base import PULSE
from looop_py.engine.levels import LoopLevel, ProposedAction
from looop_py.engine.spec import LoopSpec
from looop_py.errors import FenceLost
from looop_py.loops import advance
from looop_py.loops.executor import CommandActionExecutor
from looop_py.moves import act, union
from looop_py.workdir.paths import Paths
from tests.conftest import close_opened, open_wd, wait_for
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_shared_records import Hosts
from tests.etcdserver import Cluster

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(90)]

SPEC = LoopSpec("pr-bot", "open PRs for verified fixes", LoopLevel.L3_UNATTENDED)
ACTION = ProposedAction("open-pr", "Fix the flaky test", True)


@pytest.fixture
def two(etcd: Cluster, tmp_path: Path) -> Iterator[Hosts]:
    yield Hosts("etcd", tmp_path, etcd)
    close_opened()


def _events(wd: Paths, name: str) -> list[dict[str, object]]:
    lines = wd.events.read_text().splitlines() if wd.events.exists() else []
    return [e for e in map(json.loads, lines) if e["event"] == name]


def _lose_the_pulse(a: Paths, b: Paths) -> None:
    """Host a's lease lapses (revoked here, as expiry would) and host b takes the pulse."""
    choose.coordinator(open_wd(a)).resign()
    with choose.coordinator(open_wd(b)).pulse():
        pass


def test_a_notification_is_not_sent_after_the_pulse_is_lost(two: Hosts, tmp_path: Path) -> None:
    log = tmp_path / "notified"
    config = f'[decider]\nbackend = "noop"\n\n[notify]\ncommand = "echo $LOOOP_FENCE >> {log}"\n'
    a, b = two.workdir("a", config), two.workdir("b")
    wd = open_wd(a)
    event = {"kind": "decided", "key": "k1", "summary": "did a thing"}
    with choose.coordinator(wd).pulse() as token, wd.shelf.fenced(PULSE, token):
        _lose_the_pulse(a, b)
        assert notify.run_hook(wd, event, time.time()) is False
    assert not log.exists()  # the command never ran
    text = a.journal.read_text()
    assert f"notification decided k1 not sent: lost the pulse at token {token}" in text, text
    assert _events(a, "notify_fenced") == [
        {**_events(a, "notify_fenced")[0], "kind": "decided", "token": token}
    ]
    # Held: it runs, with the token in its environment.
    choose.coordinator(open_wd(b)).resign()
    with choose.coordinator(wd).pulse() as token2, wd.shelf.fenced(PULSE, token2):
        assert notify.run_hook(wd, {**event, "key": "k2"}, time.time()) is True
    assert log.read_text() == f"pulse:{token2}\n"


def test_a_rounds_action_does_not_run_after_the_pulse_is_lost(two: Hosts, tmp_path: Path) -> None:
    log = tmp_path / "acted"
    a, b = two.workdir("a"), two.workdir("b")
    wd = open_wd(a)

    def executor() -> CommandActionExecutor:
        return CommandActionExecutor(
            {"open-pr": f'echo "$LOOOP_FENCE" >> {log}'},
            cwd=tmp_path,
            confirm=lambda kind: advance.action_fence(wd, kind, SPEC.name, time.time()),
        )

    with choose.coordinator(wd).pulse() as token, wd.shelf.fenced(PULSE, token):
        _lose_the_pulse(a, b)
        with pytest.raises(FenceLost):
            executor().execute(SPEC, ACTION, None)
    assert not log.exists()  # the action's command never started
    text = a.journal.read_text()
    said = f"decided loop pr-bot's action open-pr, not acted: lost the pulse at token {token}"
    assert said in text, text
    (fenced,) = _events(a, "action_fenced")
    assert fenced["token"] == token and fenced["kind"] == "open-pr"
    choose.coordinator(open_wd(b)).resign()
    with choose.coordinator(wd).pulse() as token2, wd.shelf.fenced(PULSE, token2):
        assert executor().execute(SPEC, ACTION, None).ran
    assert log.read_text() == f"pulse:{token2}\n"


def test_a_worker_carries_the_fence_and_its_own_check_fails_once_the_pulse_is_handed_over(
    two: Hosts, tmp_path: Path
) -> None:
    out, go = tmp_path / "checks", tmp_path / "go"
    script = (
        f'echo "$LOOOP_FENCE ${{LOOOP_FENCE_DEADLINE:-none}}" > {out}.env;'
        f' "$LOOOP_BIN" fence check >/dev/null 2>&1; echo $? > {out}.1;'
        f" while [ ! -e {go} ]; do sleep 0.05; done;"
        f' "$LOOOP_BIN" fence check >/dev/null 2>&1; echo $? > {out}.2'
    )
    a, b = two.workdir("a"), two.workdir("b")
    wd = open_wd(a)
    move = union.parse({"action": "start_worker", "id": "w1", "prompt": script, "runtime": "shell"})
    coord = choose.coordinator(wd)
    with coord.pulse() as token, wd.shelf.fenced(PULSE, token):
        outcome = act.execute(wd, move, time.time(), approved=True)  # a human approved it
    assert outcome.ok, outcome
    coord.keep_pulse(True)  # host a keeps the pulse between beats, as `looop up` does
    first = Path(f"{out}.1")
    wait_for(first.exists, 30, "the worker's first fence check")
    assert Path(f"{out}.env").read_text() == f"pulse:{token} none\n"  # no beat deadline
    assert first.read_text() == "0\n"  # held: its host still holds the pulse, beats later
    _lose_the_pulse(a, b)
    go.touch()
    second = Path(f"{out}.2")
    wait_for(second.exists, 30, "the worker's second fence check")
    assert second.read_text() == "4\n"  # handed over: the worker's write must not happen
