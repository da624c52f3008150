"""`looop sense` on a shared backend shows the world as the beat commits it.

A beat on etcd names this host's own readings (its worker sessions) `NAME@HOST` and
carries every other host's from the shared committed world (beat/shared.py). `looop
sense` must do the same and compare with the shared committed world, not this host's
mirror of it: otherwise it says the sessions changed, and its world hash never equals a
beat's, on every host, every time.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome
from looop_py.coord import choose
from tests.conftest import open_wd, run_looop
from tests.coord.test_contract import Noop
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_shared_records import TTL, Hosts, hand_over
from tests.coord.test_shared_records import two as two  # noqa: PLC0414 - its fixture
from tests.etcdserver import free_port, use_etcd

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(90)]


def _sense(wd_root: str) -> dict[str, object]:
    done = run_looop("-C", wd_root, "sense", "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_sense_on_every_host_finds_the_world_the_last_beat_committed(two: Hosts) -> None:
    from looop_py.workers import kill, launch

    a, b = two.workdir("a"), two.workdir("b")
    launch.start(open_wd(a), "w1", "sleep 60", runtime="shell", now=time.time())
    try:
        assert beat(open_wd(a), decider=Noop()).outcome is BeatOutcome.DECIDED
        hand_over(a)
        assert beat(open_wd(b), decider=Noop()).outcome is BeatOutcome.DECIDED
        shared = json.loads(choose.coordinator(open_wd(a)).read_world() or b"{}")
        # a's mirror of the committed world is a's own commit: b's is newer
        assert json.loads(a.last_world.read_text())["hash"] != shared["hash"]
        for host in (a, b):
            found = _sense(str(host.root))
            assert found["changed"] == [], (host, found["changed"])
            assert found["world_hash"] == found["committed_hash"] == shared["hash"]
            assert found["would_wake"] is False
    finally:
        kill.kill(a, "w1")


def test_sense_shows_this_hosts_sessions_under_its_name_when_they_change(two: Hosts) -> None:
    from looop_py.workers import kill, launch

    a = two.workdir("a")
    assert beat(open_wd(a), decider=Noop()).outcome is BeatOutcome.DECIDED
    launch.start(open_wd(a), "w1", "sleep 60", runtime="shell", now=time.time())
    try:
        found = _sense(str(a.root))
        items = [c["item"] for c in found["changed"]]  # type: ignore[attr-defined]
        assert items == ["snap:sys-sessions@a"], items
        assert found["would_wake"] is True
    finally:
        kill.kill(a, "w1")


def test_sense_cut_off_from_etcd_compares_with_this_hosts_mirror(tmp_path: Path) -> None:
    """etcd out of reach: sense still reads the sensors and compares with the committed
    world this host last mirrored (none yet here), as it did before it read etcd's."""
    wd = Hosts("etcd", tmp_path, None).workdir("a")
    use_etcd(wd.config, [f"http://127.0.0.1:{free_port()}"], "/looop/nowhere", TTL)
    found = _sense(str(wd.root))
    assert found["committed_hash"] is None and found["would_wake"] is True
    items = [c["item"] for c in found["changed"]]  # type: ignore[attr-defined]
    assert "snap:sys-sessions@a" in items and "snap:sys-sessions" not in items
