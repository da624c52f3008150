"""The committed world on etcd, one key per item (coord/worldstore.py): a commit writes only
what changed, counted by etcd itself; the goal ceiling holds at its size; a holder that
lost the pulse writes nothing; a world committed as one value by an older looop is read
and replaced.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.coord import choose
from looop_py.coord.base import PULSE
from looop_py.coord.remote import EtcdCoordinator
from looop_py.coord.worldstore import GOAL_CEILING
from looop_py.sensing.sense import parse_committed
from tests.conftest import close_opened, open_wd
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_shared_records import Hosts
from tests.etcdserver import Cluster

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(180)]


@pytest.fixture
def coord(etcd: Cluster, tmp_path: Path) -> Iterator[EtcdCoordinator]:
    wd = open_wd(Hosts("etcd", tmp_path, etcd).workdir("a"))
    found = choose.coordinator(wd)
    assert isinstance(found, EtcdCoordinator)
    yield found
    close_opened()


def mvcc(cluster: Cluster) -> dict[str, int]:
    """etcd's own count of the puts and deletes it applied (its /metrics), on each member."""
    with urllib.request.urlopen(cluster.endpoints[0] + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        m[1]: int(float(m[2])) for m in re.finditer(r"^etcd_mvcc_(\w+)_total (\S+)$", text, re.M)
    }


def record(items: dict[str, str], action: str = "noop") -> dict[str, object]:
    return {"v": 1, "hash": f"h{len(items)}", "items": items, "committed_at": time.time(),
            "action": action, "next_wake": None}  # fmt: skip


def test_a_holder_that_lost_the_pulse_commits_nothing(coord: EtcdCoordinator) -> None:
    with coord.pulse() as token:
        assert token is not None
    coord.resign()  # lost (as the lease lapsing would)
    assert not coord.commit_world(PULSE, token, record({"goal:a": "1"}))
    assert coord.read_world() is None


def test_a_commit_writes_only_what_changed_at_the_goal_ceiling(
    coord: EtcdCoordinator, etcd: Cluster
) -> None:
    items = {f"goal:g{i:05d}": f"xxh3:{i:032x}" for i in range(GOAL_CEILING)}
    with coord.pulse() as token:
        assert token is not None
        t = time.monotonic()
        assert coord.commit_world(PULSE, token, record(items))
        first_s = time.monotonic() - t
        t = time.monotonic()
        back = parse_committed(jsonio.loads(coord.read_world() or b""))
        read_s = time.monotonic() - t
        assert back.items == items and back.hash == f"h{GOAL_CEILING}"
        before = mvcc(etcd)
        changed = dict(items)
        changed["goal:g00007"] = "xxh3:changed"
        del changed["goal:g00008"]
        assert coord.commit_world(PULSE, token, record(changed, "run_shell"))
        after = mvcc(etcd)
    print(f"{GOAL_CEILING} goals: first commit {first_s:.1f} s, read {read_s:.2f} s")
    assert after["put"] - before["put"] == 2  # the changed item and the meta, nothing else
    assert after["delete"] - before["delete"] == 1  # the item that went
    assert after["txn"] - before["txn"] == 1
    back = parse_committed(jsonio.loads(coord.read_world() or b""))
    assert back.items == changed and back.action == "run_shell"


def test_a_world_committed_as_one_value_is_read_then_replaced(coord: EtcdCoordinator) -> None:
    old = record({"goal:a": "1", "snap:x@b": "2"})
    with coord.pulse() as token:
        assert token is not None
        assert coord.fenced_put(PULSE, token, "world/committed", jsonio.dumps(old))
        got = parse_committed(jsonio.loads(coord.read_world() or b""))
        assert got.items == old["items"]
        assert coord.commit_world(PULSE, token, record({"goal:a": "1"}))
    assert coord.read("world/committed") is None  # the single value is gone
    assert parse_committed(jsonio.loads(coord.read_world() or b"")).items == {"goal:a": "1"}
