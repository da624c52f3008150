"""Work in play on etcd keeps the seal (beat/vouch.py, coord/etcdseal.py): a pending ask, a
live claim, a live worker, a running round or one awaiting approval.

On etcd the asks, answers, rounds and claims are keys, and the seal's fingerprint proves in
one transaction that none was put, created or deleted since the sealed beat read them. So
the seal may vouch for what a full beat would derive from those keys plus what the quiet beat
rechecks here: each process of this host the state rests on (an ask's waiter, a worker, a
round's maker) by pid and create time. Another host's holder is covered by its lease: the
key goes when its host dies. The hostile question first: can the seal vouch for anything
the next beat must act on? `looop sense` is the oracle of the world, and the records after
the beat say the beat did what a full beat does.

Real etcd (tests/etcdserver.py), real `looop` processes; requests counted by etcd itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from looop_py.beat import vouch
from looop_py.coord.etcd import Client, delete, put, value_of
from looop_py.identity import is_alive
from looop_py.loops import store
from looop_py.loops.advance import start_round
from looop_py.workdir import shelf
from looop_py.workdir.paths import Paths
from tests.beat.test_quiet import _child_pulse
from tests.beat.test_quiet_round import DONE, WAITS
from tests.beat.test_quiet_round import release as release  # noqa: PLC0414 - ends the makers
from tests.conftest import open_wd, run_looop, wait_for
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_etcdseal import TRACE, _beats, _changed, _client, _host, _pulse, _sealed
from tests.coord.test_etcdseal import alone as alone  # noqa: PLC0414 - a cluster of its own
from tests.coord.test_etcdseal import two as two  # noqa: PLC0414 - two hosts, one prefix
from tests.coord.test_shared_records import Hosts, hand_over
from tests.etcdserver import Cluster

pytestmark = pytest.mark.etcd


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts (`looop ask`, a claim's holder): killed by pid at the end."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


def _sensed(wd: Paths) -> str:
    """The committed world's hash, once `looop sense` finds the world equal to it (the same
    environment as the beats: the seal covers the environment's names)."""
    done = run_looop("-C", str(wd.root), "sense", "--json", env=TRACE)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["changed"] == [], found["changed"]
    assert found["world_hash"] == found["committed_hash"]
    return str(found["committed_hash"])


def _quiet(wd: Paths) -> dict[str, object]:
    """A beat that must be the sealed quiet one."""
    beat = _pulse(wd)
    assert beat.get("sealed") is True, beat
    return beat


def _sealed_in_play(wd: Paths) -> Paths:
    """Beat until the work in play is sealed, and prove one quiet beat holds."""
    wait_for(lambda: _sealed(wd) and _pulse(wd).get("sealed") is True, 30, "a quiet beat")
    return wd


def _full(wd: Paths) -> dict[str, object]:
    """The next beat: a full one, whose world is the one `looop sense` finds."""
    beat = _pulse(wd)
    assert beat.get("sealed") is None, beat
    assert beat["world_hash"] == _sensed(wd), beat
    return beat


def _requests(cluster: Cluster) -> int:
    """gRPC calls etcd started, LeaseKeepAlive left out: the keepers of the leases in play
    send those on their own clock (a third of the TTL)."""
    with urllib.request.urlopen(f"{cluster.endpoints[0]}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("grpc_server_started_total{") and "LeaseKeepAlive" not in line
    )


# -- a pending ask ----------------------------------------------------------------------------


Asker = subprocess.Popen[bytes]


def _ask(wd: Paths, spawned: list[Asker]) -> tuple[str, Asker]:
    """A `looop ask` waiting for a human on host `wd`: its id, once its waiter is recorded."""
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    argv = [sys.executable, "-m", "looop_py", "-C", str(wd.root), "ask", "--prompt", "ship?"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    spawned.append(proc)

    found: list[str] = []

    def waiting() -> bool:
        for name, data in shelf.json_items(open_wd(wd).shelf, "asks"):
            if isinstance(data, dict) and data.get("waiter", {}).get("pid") == proc.pid:
                found.append(name)
        return bool(found)

    wait_for(waiting, 20, "the asker to record itself")
    return found[0], proc


def _ask_key(two: Hosts, ask_id: str) -> str:
    return f"{two.prefix}/data/asks/{ask_id}"


def _answered_on_b(two: Hosts, ask_id: str, waiter: Asker) -> str:
    done = run_looop("-C", str(two.workdir("b").root), "answer", ask_id, "yes")
    assert done.returncode == 0, done.stderr
    wait_for(lambda: waiter.poll() is not None, 20, "the asker to take its answer and end")
    return "answered"


def _withdrawn_on_b(two: Hosts, ask_id: str, waiter: Asker) -> str:
    done = run_looop("-C", str(two.workdir("b").root), "withdraw", ask_id)
    assert done.returncode == 0, done.stderr
    return "answered"


def _key_deleted(two: Hosts, ask_id: str, waiter: Asker) -> str:
    assert two.cluster is not None
    _client(two.cluster).txn([], [delete(_ask_key(two, ask_id))])
    return "gone"


def _key_rewritten(two: Hosts, ask_id: str, waiter: Asker) -> str:
    """The same bytes put again: its mod revision moves, so a full beat reads it."""
    assert two.cluster is not None
    client = _client(two.cluster)
    [kv] = client.get(_ask_key(two, ask_id))
    client.txn([], [put(_ask_key(two, ask_id), value_of(kv))])
    return "pending"


def _waiter_killed(two: Hosts, ask_id: str, waiter: Asker) -> str:
    waiter.kill()
    waiter.wait()
    return "stranded"


ASK_MUTATIONS: dict[str, Callable[[Hosts, str, Asker], str]] = {
    "another host answers it": _answered_on_b,
    "another host withdraws it": _withdrawn_on_b,
    "its key is deleted": _key_deleted,
    "its key is rewritten with the same bytes": _key_rewritten,
    "its waiter here is SIGKILLed": _waiter_killed,
}


def _ask_state(wd: Paths, ask_id: str) -> str:
    box = open_wd(wd).shelf
    if box.get("answers", ask_id) is not None:
        return "answered"
    raw = box.get("asks", ask_id)
    if raw is None:
        return "gone"
    return "stranded" if json.loads(raw).get("stranded") else "pending"


@pytest.mark.parametrize("mutate", ASK_MUTATIONS.values(), ids=list(ASK_MUTATIONS))
def test_no_change_to_a_pending_ask_slips_past_the_seal(
    two: Hosts, spawned: list[Asker], mutate: Callable[[Hosts, str, Asker], str]
) -> None:
    a = _host(two, "a")
    _host(two, "b")
    ask_id, waiter = _ask(a, spawned)
    _sealed_in_play(a)
    expected = mutate(two, ask_id, waiter)
    beat = _full(a)
    if expected != "pending":
        assert "snap:sys-asks" in _changed(beat), beat  # the beat saw it and acted on it
    assert _ask_state(a, ask_id) == expected  # where a full beat leaves it (stranded: marked)
    wait_for(lambda: _pulse(a).get("sealed") is True, 30, "the seal again")


def test_another_hosts_ask_whose_host_died_stays_pending_and_quiet(
    two: Hosts, spawned: list[subprocess.Popen[bytes]]
) -> None:
    """Only the asker's host can tell its asker is gone (mailbox.state_of): a full beat here
    finds it pending too, so the seal holds; once that host marks it, the seal breaks."""
    a, b = _host(two, "a"), _host(two, "b")
    ask_id, waiter = _ask(b, spawned)
    sealed = _sealed_in_play(a)
    _waiter_killed(two, ask_id, waiter)
    assert _quiet(a)["world_hash"] == _sensed(sealed)
    hand_over(a)  # the pulse sticks to the host that beat last (coord/election.py)
    _pulse(b)  # b finds its asker gone: the ask is marked stranded, for every host
    hand_over(b)
    assert _ask_state(a, ask_id) == "stranded"
    assert _full(a)["outcome"] == "skipped"  # b decided on it already: the world is shared


# -- a live claim whose holder's host dies --------------------------------------------------


def _keeper_of(lease: int) -> int:
    """The keeper process `looop claim` started for `lease` (coord/leasekeep.py)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"looop_py.coord.keeper" in b" ".join(argv) and str(lease).encode() in argv:
                return int(pid)
    raise AssertionError(f"no keeper for lease {lease}")


def _claim_lease(two: Hosts, name: str) -> int:
    assert two.cluster is not None
    [kv] = _client(two.cluster).get(f"{two.prefix}/claims/{name}")
    return int(json.loads(value_of(kv))["lease"])


def test_a_claim_whose_holders_host_dies_breaks_the_seal_when_its_lease_runs_out(
    two: Hosts, spawned: list[subprocess.Popen[bytes]]
) -> None:
    a, b = _host(two, "a"), _host(two, "b")
    holder = subprocess.Popen(["sleep", "600"])
    spawned.append(holder)
    args = ("claim", "repo", "--session", "s1", "--pid", str(holder.pid))
    held = run_looop("-C", str(b.root), *args)
    assert held.returncode == 0, held.stderr
    _sealed_in_play(a)
    keeper = _keeper_of(_claim_lease(two, "repo"))
    os.kill(keeper, signal.SIGKILL)  # host b dies: its keeper and the holder with it
    holder.kill()
    assert two.cluster is not None
    client = _client(two.cluster)
    wait_for(lambda: not client.get(f"{two.prefix}/claims/repo"), 20, "the lease to run out")
    assert "snap:sys-claims" in _changed(_full(a))


# -- a round whose worker runs here, and one whose worker runs on another host -----------------


def _loop_goal(wd: Paths, release: Path, **extra: str) -> None:
    maker = WAITS.format(release=release, what="made")
    lines = ["---", "intent: sweep the floor", "level: L1-report", "runtime: shell"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    lines += [f"maker: '{maker}'", f"checker: '{DONE} checked'", "---", "# sweep", ""]
    (wd.goals / "sweep.md").write_text("\n".join(lines))


def _round_of(wd: Paths) -> dict[str, Any]:
    [(_, data)] = shelf.json_items(open_wd(wd).shelf, store.LIVE)
    assert isinstance(data, dict)
    return data


def _maker_meta(wd: Paths) -> dict[str, Any]:
    handle = _round_of(wd)["maker_handle"]
    return dict(json.loads((wd.sessions / handle / "meta.json").read_text()))


def _running_round(wd: Paths, release: Path, **extra: str) -> Paths:
    """A loop round started on host `wd`, its shell maker running there."""
    _pulse(wd)
    _loop_goal(wd, release, **extra)
    state = start_round(open_wd(wd), "sweep", now=time.time(), trigger="test")
    assert state.phase.value == "maker-running", state
    wait_for(lambda: _maker_meta(wd).get("pid"), 20, "the maker's supervisor to record it")
    return wd


def _kill_maker(wd: Paths) -> None:
    """Its supervisor first, so nothing rewrites the session's records: only the pid goes."""
    meta = _maker_meta(wd)
    for pid, created in (
        (meta["supervisor_pid"], meta["supervisor_create_time"]),
        (meta["pid"], meta["create_time"]),
    ):
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not is_alive(pid, created), 10, f"{pid} to die")  # noqa: B023


def test_a_round_whose_maker_here_is_sigkilled_breaks_the_seal(two: Hosts, release: Path) -> None:
    a = _sealed_in_play(_running_round(_host(two, "a"), release))
    assert _round_of(a)["phase"] == "maker-running"
    _kill_maker(a)
    _full(a)
    assert _round_of(a)["phase"] == "done"  # lost with no result: the round ends, as on files


def test_a_round_whose_maker_ends_breaks_the_seal_and_steps_on(two: Hosts, release: Path) -> None:
    a = _sealed_in_play(_running_round(_host(two, "a"), release))
    meta = _maker_meta(a)
    release.touch()
    wait_for(lambda: not is_alive(meta["pid"], meta["create_time"]), 20, "the maker to end")
    status = a.sessions / meta["id"] / "status.json"
    wait_for(lambda: '"exited"' in status.read_text(), 20, "its supervisor to record the end")
    _full(a)
    assert _round_of(a)["phase"] in ("checker-running", "done")


def test_another_hosts_round_rests_on_its_workers_claim(two: Hosts, release: Path) -> None:
    """Host b runs the maker: a leaves the round to b while the worker's claim lives (quiet),
    and steps it on once b is gone and the claim's lease has run out."""
    b = _running_round(_host(two, "b"), release)
    hand_over(b)  # the pulse sticks to the host that beat last (coord/election.py)
    a = _sealed_in_play(_host(two, "a"))
    assert _round_of(a)["phase"] == "maker-running"
    _quiet(a)
    handle = _round_of(a)["maker_handle"]
    keeper = _keeper_of(_claim_lease(two, f"worker.{handle}"))
    _kill_maker(b)
    os.kill(keeper, signal.SIGKILL)  # host b is gone, its keeper with it
    assert two.cluster is not None
    client = _client(two.cluster)
    key = f"{two.prefix}/claims/worker.{handle}"
    wait_for(lambda: not client.get(key), 20, "the worker's lease to run out")
    _full(a)
    assert _round_of(a)["phase"] == "done"  # a stepped it on: its session is not here


# -- a live worker here -------------------------------------------------------------------------


def _worker(wd: Paths, release: Path) -> dict[str, Any]:
    """A live worker whose output churns, until `release` exists (the fixture makes it at
    the end: no worker outlives its test)."""
    script = f"while [ ! -e {release} ]; do date +%N; sleep 0.1; done"
    done = run_looop("-C", str(wd.root), "worker", "start", "w1", "--runtime", "shell", script)
    assert done.returncode == 0, done.stderr
    meta = wd.sessions / "w1" / "meta.json"
    wait_for(lambda: meta.exists() and json.loads(meta.read_text()).get("pid"), 20, "its pid")
    return dict(json.loads(meta.read_text()))


def test_a_worker_here_sigkilled_breaks_the_seal(two: Hosts, release: Path) -> None:
    a = _host(two, "a")
    meta = _worker(a, release)
    _sealed_in_play(a)
    os.kill(meta["supervisor_pid"], signal.SIGKILL)
    os.kill(meta["pid"], signal.SIGKILL)
    wait_for(lambda: not is_alive(meta["pid"], meta["create_time"]), 10, "the worker to die")
    assert any(item.startswith("snap:sys-sessions") for item in map(str, _changed(_full(a))))


# -- etcd itself --------------------------------------------------------------------------------


def test_etcd_unreachable_with_work_in_play_is_loud_not_a_crash(
    alone: Hosts, spawned: list[subprocess.Popen[bytes]]
) -> None:
    a = _host(alone, "a")
    _ask(a, spawned)
    _sealed_in_play(a)
    assert alone.cluster is not None
    alone.cluster.stop()
    cut = run_looop("-C", str(a.root), "pulse")
    assert cut.returncode == 3, (cut.stdout, cut.stderr)
    assert "etcd cannot be reached" in cut.stderr
    assert "Traceback" not in cut.stderr
    assert not (a.state / "quiet-seal").exists()


def test_a_compacted_etcd_keeps_the_world_the_full_beat_finds(
    alone: Hosts, spawned: list[subprocess.Popen[bytes]]
) -> None:
    """Compaction drops old revisions, not keys nor their mod revisions: the seal's compare
    still proves what it proved, and the beat's world is `looop sense`'s."""
    a = _host(alone, "a")
    _ask(a, spawned)
    _sealed_in_play(a)
    assert alone.cluster is not None
    client: Client = _client(alone.cluster)
    revision = int(client.post("/kv/range", {"key": "AA=="})["header"]["revision"])
    client.post("/kv/compaction", {"revision": str(revision), "physical": True})
    beat = _pulse(a)
    assert beat["world_hash"] == _sensed(a), beat
    assert beat.get("sealed") is True, beat  # nothing changed: still quiet


def test_a_rounds_wall_budget_ends_the_seal(two: Hosts, release: Path) -> None:
    """max_wall_s steps the round by the clock alone: the seal's `until`, as on files."""
    a = _sealed_in_play(_running_round(_host(two, "a"), release, budget="{max_wall_s: 6}"))
    started = float(_round_of(a)["started_at"])
    until = float((a.state / "quiet-seal").read_text().split("\n")[2].split(" ")[1])
    assert until <= started + 6
    wait_for(lambda: time.time() > started + 6, 15, "the wall budget to run out", interval=0.1)
    _full(a)
    assert _round_of(a)["outcome"] == "budget-exhausted"


def _awaiting_approval(wd: Paths, release: Path) -> str:
    """An L2 round whose maker and checker ended, its proposal waiting for a human."""
    with (wd.root / "looop.toml").open("a") as f:
        f.write('\n[actions.apply]\ncommand = "true"\n')
    _running_round(wd, release, level="L2-assisted", action="apply")
    release.touch()
    wait_for(lambda: _pulse(wd) and _round_of(wd)["phase"] == "awaiting-approval", 30, "its ask")
    return str(_round_of(wd)["ask"])


def test_a_round_awaiting_approval_keeps_the_seal_until_another_host_approves(
    two: Hosts, release: Path
) -> None:
    a, b = _host(two, "a"), _host(two, "b")
    ask_id = _awaiting_approval(a, release)
    _sealed_in_play(a)
    _quiet(a)
    done = run_looop("-C", str(b.root), "approve", ask_id)
    assert done.returncode == 0, done.stderr
    _full(a)
    wait_for(lambda: _pulse(a) and _round_of(a)["phase"] == "done", 20, "the round to end")
    assert _round_of(a)["outcome"] == "proceeded"


# -- the happy days: each kind in play costs one request ------------------------------------------


def _in_play(kind: str, hosts: Hosts, release: Path, spawned: list[Asker]) -> Paths:
    a = _host(hosts, "a")
    if kind in ("ask", "all"):
        _ask(a, spawned)
    if kind == "answered":
        ask_id, _ = _ask(a, spawned)
        done = run_looop("-C", str(a.root), "answer", ask_id, "yes")
        assert done.returncode == 0, done.stderr
    if kind in ("claim", "all"):
        holder = subprocess.Popen(["sleep", "600"])
        spawned.append(holder)
        args = ("claim", "repo", "--session", "s1", "--pid", str(holder.pid), "--ttl", "3600")
        held = run_looop("-C", str(a.root), *args)
        assert held.returncode == 0, held.stderr
    if kind in ("worker", "all"):
        _worker(a, release)
    if kind in ("round", "all"):
        _running_round(a, release)
    return _sealed_in_play(a)


@pytest.mark.parametrize("kind", ["ask", "answered", "claim", "worker", "round", "all"])
def test_work_in_play_keeps_the_seal_in_one_request(
    alone: Hosts, release: Path, spawned: list[Asker], kind: str
) -> None:
    """etcd counts every request it serves: a waiting `looop ask` also looks every 10 s
    (shelf.Pause), so the fewest a beat of three was counted with is the beat's own."""
    a = _in_play(kind, alone, release, spawned)
    assert alone.cluster is not None
    counted = []
    for _ in range(3):
        before = _requests(alone.cluster)
        beat = _quiet(a)
        counted.append(_requests(alone.cluster) - before)
        assert beat["outcome"] == "skipped" and beat["world_hash"] == beat["prev_hash"]
    assert min(counted) == 1, counted
    assert beat["world_hash"] == _sensed(a)


def test_an_approval_still_to_be_carried_out_refuses_the_seal(two: Hosts) -> None:
    """On files state/approved/ holding one refuses it; on etcd it is a key the next beat's
    first step carries out, so the seal does not vouch for the asks meanwhile."""
    a = _host(two, "a")
    wd = open_wd(a)
    assert vouch.asks_now(wd) is not None
    wd.shelf.put("approved", "human-9", b"{}")
    assert vouch.asks_now(wd) is None


def test_a_quiet_pulse_on_etcd_loads_only_the_c_halves_of_socket_json_and_base64(
    alone: Hosts,
) -> None:
    """socket, json and base64 load enum, re, selectors, the idna codec …: ~12 ms of CPU of a
    quiet beat on etcd, where `_socket`, `_json` and `binascii` do its one request."""
    a = _sealed(_host(alone, "a"))
    heavy = ("socket", "json", "base64", "re", "enum", "contextlib", "threading")
    heavy += ("encodings.idna", "selectors", "functools", "collections", "typing")
    code = _child_pulse(
        a, f"print('HEAVY', [m for m in {heavy!r} if m in set(sys.modules) - before])"
    )
    for _ in range(2):  # the first run seals for this interpreter and argv, the second is quiet
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr
    assert _beats(a)[-1].get("sealed") is True
