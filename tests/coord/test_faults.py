"""The fault suite: real hosts (processes) beating one loop on a real 3-member etcd, paused
and cut off, counted from an act log the side effect itself writes (tests/coord/faultrig.py).

What must hold whatever the fault: no act starts after its holder's renew deadline, no
act starts after a newer token's act did (a stale holder's side effect), no decision acts
twice (by its decide id), and a holder that lost the pulse says so in its journal — a
decision not acted on as "not acted: lost the pulse at token T", an act in flight with
its token.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.coord.faultrig import Rig, count, netns_missing
from tests.etcdserver import Cluster

pytestmark = [pytest.mark.etcd, pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster3() -> Iterator[Cluster]:
    root = Path(
        tempfile.mkdtemp(
            prefix="looop-faults-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
        )
    )
    cluster = Cluster(root, size=3).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def rig(cluster3: Cluster, tmp_path: Path) -> Rig:
    return Rig(tmp_path, cluster3.endpoints, f"/looop/faults-{uuid.uuid4().hex[:8]}")


def _acted(rig: Rig, host: str) -> bool:
    """One beat of `host`; True once it has acted (it is locked out while the other holds)."""
    rig.beat(host)
    return bool(count(rig.log).by_host(host))


def _clean(rig: Rig) -> None:
    c = count(rig.log)
    assert c.late == [], c.late  # nothing started after its renew deadline
    assert c.stale == [], c.stale  # nothing started after a newer token acted
    assert c.twice == [], c.twice  # no decision acted on twice


@pytest.mark.parametrize("held", [False, True], ids=["taking", "sticky"])
def test_a_holder_paused_inside_its_decide_does_not_act_and_says_so(rig: Rig, held: bool) -> None:
    """`sticky`: host a already holds the pulse from its last beat, and this beat renews
    that lease (the same token) before it is paused: once the lease expired, it must not act."""
    if held:  # a TTL that outlasts the gap between a's two `looop pulse` processes
        rig = Rig(rig.tmp, rig.endpoints, rig.prefix, ttl=6.0)
    rig.scripts(decide_s=0.3)
    if held:
        code, said = rig.beat("a")
        assert code == 0, said
        rig.deciding("a")  # that beat's, done
        (first,) = count(rig.log).by_host("a")
    a = rig.pulse("a")
    pid = rig.deciding("a")
    os.kill(pid, signal.SIGSTOP)  # a GC pause, a VM migration, a laptop lid
    try:
        wait_for(lambda: _acted(rig, "b"), 30, "host b to take the pulse and act", interval=0)
    finally:
        os.kill(pid, signal.SIGCONT)
    _, err = a.communicate(timeout=30)
    assert count(rig.log).by_host("a") == ([first] if held else [])  # not carried out
    text = rig.journal("a")
    assert "decided run-shell" in text and "not acted: lost the pulse at token" in text, text
    assert a.returncode != 0 and "lost the pulse at token" in err, (a.returncode, err)
    if held:  # the paused beat had renewed a's lease: the token it lost was its first one
        assert f"lost the pulse at token {first.token}" in err, (first, err)
    _clean(rig)


def test_a_holder_paused_inside_its_act_journals_the_act_with_its_token(rig: Rig) -> None:
    rig.scripts(act_s=1.0)
    a = rig.pulse("a")
    pid = rig.deciding("a")
    rig.acting("a")
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _acted(rig, "b"), 30, "host b to take the pulse and act", interval=0)
    finally:
        os.kill(pid, signal.SIGCONT)
    a.communicate(timeout=30)
    [act] = count(rig.log).by_host("a")
    assert act.start < act.deadline  # it started while its token was sure to hold
    assert f"token {act.token}" in rig.journal("a")  # in flight when lost: journaled with it
    _clean(rig)


def test_a_second_machine_under_a_live_host_id_is_refused_naming_both(rig: Rig) -> None:
    rig.scripts()
    code = (
        "import sys, time, pathlib\n"
        "from looop_py.coord.choose import coordinator, open_workdir\n"
        "from looop_py.workdir.paths import Paths\n"
        "wd = open_workdir(Paths(pathlib.Path(sys.argv[1])))\n"
        "coordinator(wd).register()\n"
        "print('registered', flush=True)\n"
        "sys.stdin.read()\n"
        "wd.close()\n"
    )
    one = subprocess.Popen(  # host a, live on machine one while its stdin is open
        [sys.executable, "-c", code, str(rig.host("a~one"))],
        env=rig.env("a~one"),
        cwd=rig.tmp,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert one.stdout is not None and one.stdout.readline() == "registered\n"
    try:
        for args in (("pulse", "--force"), ("claim", "repo")):
            code, said = rig.beat("a~two", *args)  # host id a again, on machine two
            assert code == 2, (args, said)
            assert "host id 'a' is live on another machine" in said, said
            assert "machine-one" in said and "machine-two" in said  # naming both
        code, said = rig.beat("b", "claim", "ci")  # a machine of its own: granted
        assert code == 0, said
        code, said = rig.beat("a~one", "claim", "ci2")  # the same machine again: its own id
        assert code == 0, said
    finally:
        one.communicate("", timeout=30)
    assert count(rig.log).acts == []  # the refused pulse never acted
    code, said = rig.beat("a~two", "claim", "ci3")  # machine one gone: the id is free again
    assert code == 0, said


def _beating(
    rig: Rig, hosts: list[str], stop: threading.Event, codes: list[int]
) -> list[threading.Thread]:
    def run(host: str) -> None:
        while not stop.is_set():
            code, _ = rig.beat(host)
            codes.append(code)

    threads = [threading.Thread(target=run, args=(h,), daemon=True) for h in hosts]
    for t in threads:
        t.start()
    return threads


@pytest.mark.parametrize("fault", ["pause", "kill"])  # kill last: the cluster stays at two
def test_the_etcd_leader_killed_or_paused_under_beating_hosts(
    rig: Rig, cluster3: Cluster, fault: str
) -> None:
    rig.scripts()
    stop, codes = threading.Event(), []
    threads = _beating(rig, ["a", "b"], stop, codes)
    try:
        wait_for(lambda: len(count(rig.log).acts) >= 3, 60, "the hosts to act a few times")
        leader = cluster3.leader()
        proc = cluster3.procs[cluster3.names[leader]]
        if fault == "kill":
            cluster3.kill(leader)
        else:
            os.kill(proc.pid, signal.SIGSTOP)
        before = len(count(rig.log).acts)
        try:
            wait_for(lambda: len(count(rig.log).acts) >= before + 3, 60, "acts under the fault")
        finally:
            if fault == "pause":
                os.kill(proc.pid, signal.SIGCONT)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    _clean(rig)


def test_a_host_partitioned_in_a_network_namespace_is_loud_and_acts_nothing(rig: Rig) -> None:
    """Host a holds the pulse, then is cut off from every etcd member (its processes run in
    a network namespace of their own): its pulses exit 3 saying why and since when, and act
    0 times, while host b takes the pulse once a's lease lapses and carries on."""
    why = netns_missing()
    if why:
        pytest.skip(why)
    rig.scripts()
    code, said = rig.beat("a")
    assert code == 0, said
    acted = len(count(rig.log).by_host("a"))
    assert acted == 1
    rig.cut.add("a")
    code, said = rig.beat("a")
    assert code == 3, said
    assert "✗ beat skipped: etcd cannot be reached" in said and "(since 20" in said, said
    since = said.split("(since ", 1)[1].split(")", 1)[0]
    wait_for(lambda: _acted(rig, "b"), 30, "host b to take the pulse and act", interval=0)
    for _ in range(2):
        code, again = rig.beat("a")
        assert code == 3 and f"(since {since})" in again, again  # still cut off, since then
    assert len(count(rig.log).by_host("a")) == acted  # nothing acted while cut off
    assert "coordination unavailable, beat skipped" in rig.journal("a")
    rig.cut.discard("a")  # healed: a beats again (stands by, or leads once b's lease lapsed)
    code, said = rig.beat("a", "pulse")
    assert code == 0, said
    _clean(rig)
