"""The seal on etcd (coord/etcdseal.py, beat/quiet.py): one transaction proves the shared
keys unchanged, and anything another host or process changes breaks it.

Real etcd (tests/etcdserver.py), real `looop pulse` processes; requests are counted
by etcd itself (its /metrics: gRPC calls the gateway made), not by our client.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py.coord import base, etcdseal
from looop_py.coord.etcd import Client, delete, put
from looop_py.workdir.config import CoordinationConfig
from looop_py.workdir.paths import Paths
from tests.conftest import close_opened, run_looop, write_sensor
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_shared_records import Hosts
from tests.etcdserver import Cluster

pytestmark = pytest.mark.etcd

# What the quiet beat on etcd loads beyond the one on files, before typing is ever loaded
# (tests/beat/test_quiet.py lets these keep the typing-free idiom; the last test here
# proves it).
ETCD_QUIET_MODULES = {"looop_py.coord.etcdseal", "looop_py.coord.etcd", "looop_py.coord.wire"}


@pytest.fixture
def two(etcd: Cluster, tmp_path: Path) -> Iterator[Hosts]:
    yield Hosts("etcd", tmp_path, etcd)
    close_opened()


def _client(cluster: Cluster) -> Client:
    return Client(CoordinationConfig(backend="etcd", endpoints=tuple(cluster.endpoints)))


def _kv(client: Client, key: str, value: bytes = b"{}") -> None:
    client.txn([], [put(key, value)])


def _requests(cluster: Cluster) -> int:
    """The gRPC calls etcd has started, summed over its methods (the gateway makes one per
    HTTP request it is sent)."""
    with urllib.request.urlopen(f"{cluster.endpoints[0]}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("grpc_server_started_total{")
    )


def _beats(wd: Paths) -> list[dict[str, object]]:
    lines = wd.events.read_text().splitlines()
    return [e for e in map(json.loads, lines) if e.get("event") == "beat"]


# Every pulse here lists its imports on stderr (the seal covers the environment's names,
# so the sealing beats and the quiet one run with the same variables).
TRACE = {"PYTHONPROFILEIMPORTTIME": "1"}


def _run_pulse(wd: Paths) -> str:
    done = run_looop("-C", str(wd.root), "pulse", env=TRACE)
    assert done.returncode == 0, (done.stdout, done.stderr[-2000:])
    return done.stderr


def _pulse(wd: Paths) -> dict[str, object]:
    _run_pulse(wd)
    return _beats(wd)[-1]


def _sealed(wd: Paths) -> Paths:
    """Pulse until a full beat has sealed the work dir (the first beats commit the world,
    then one skips and seals)."""
    for _ in range(5):
        _pulse(wd)
        if (wd.state / "quiet-seal").exists():
            return wd
    raise AssertionError(f"never sealed: {_beats(wd)[-1]}")


def _changed(beat: dict[str, object]) -> list[object]:
    changed = beat.get("changed")
    assert isinstance(changed, list), beat
    return [c["item"] for c in changed if isinstance(c, dict)]


def _host(two: Hosts, name: str = "a") -> Paths:
    wd = two.workdir(name)
    write_sensor(wd, "s", "echo 1")
    return wd


# -- the fingerprint, rainy days first ----------------------------------------------------


def test_a_put_of_the_same_bytes_a_new_key_and_a_delete_each_break_it(etcd: Cluster) -> None:
    client = _client(etcd)
    prefix = "/looop/fp-a"
    cfg = client.cfg
    _kv(client, f"{prefix}/data/world/committed", b"w")
    for change in (
        lambda: _kv(client, f"{prefix}/data/world/committed", b"w"),  # same bytes, new revision
        lambda: _kv(client, f"{prefix}/data/asks/a1"),
        lambda: _kv(client, f"{prefix}/claims/repo"),
        lambda: client.txn([], [delete(f"{prefix}/data/asks/a1")]),
        lambda: client.txn([], [delete(f"{prefix}/claims/repo")]),
    ):
        sealed = etcdseal.mark(client, cfg, prefix)
        assert etcdseal.holds(sealed, client)
        change()
        assert not etcdseal.holds(sealed, client)
        assert not etcdseal.holds(etcdseal.Fingerprint.from_line(sealed.line()))  # as read back


def test_a_delete_and_a_create_elsewhere_in_the_same_range_still_break_it(etcd: Cluster) -> None:
    """Same count, but the new key was written after the sealed revision."""
    client = _client(etcd)
    prefix = "/looop/fp-b"
    _kv(client, f"{prefix}/data/rounds/r1")
    sealed = etcdseal.mark(client, client.cfg, prefix)
    client.txn([], [delete(f"{prefix}/data/rounds/r1"), put(f"{prefix}/data/rounds/r2", b"{}")])
    assert not etcdseal.holds(sealed, client)


def test_keys_that_are_not_the_worlds_leave_it_standing(etcd: Cluster) -> None:
    """The pulse claim, host registrations, lease records, and other loops' prefixes —
    including one that merely starts with the same letters — change every beat elsewhere."""
    client = _client(etcd)
    prefix = "/looop/fp-c"
    _kv(client, f"{prefix}/data/world/committed", b"w")
    sealed = etcdseal.mark(client, client.cfg, prefix)
    for key in (
        f"{prefix}/claims/{base.PULSE}",
        f"{prefix}/hosts/a/1f",
        f"{prefix}/leases/a/123-456",
        f"{prefix}x/data/world/committed",
        f"{prefix}-2/claims/repo",
        "/looop/fp-b/data/asks/z",
    ):
        _kv(client, key)
        assert etcdseal.holds(sealed, client), key
    client.txn([], [delete(f"{prefix}/claims/{base.PULSE}")])
    assert etcdseal.holds(sealed, client)


def test_a_beat_during_which_anything_was_written_is_not_settled(etcd: Cluster) -> None:
    """The full beat's reads are not at one revision: it seals only when nothing at all was
    written while it read, even outside its ranges (a key may have come and gone)."""
    client = _client(etcd)
    prefix = "/looop/fp-d"
    mark = etcdseal.mark(client, client.cfg, prefix)
    assert etcdseal.settled(client, mark) is mark
    _kv(client, f"{prefix}/hosts/b/2a")  # outside the ranges, yet the revision moved
    assert etcdseal.settled(client, mark) is None


def test_the_pulse_left_out_is_the_one_beats_take() -> None:
    assert etcdseal.PULSE == base.PULSE


@pytest.mark.parametrize(
    "line",
    [
        "",
        "{}",
        '{"prefix":"/p","revision":"x","counts":[],"etcd":{}}',
        '{"prefix":"/p","revision":1,"counts":[1],"etcd":{"endpoints":"http://a:1"}}',
    ],
)
def test_a_damaged_shared_line_is_refused(line: str) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        etcdseal.Fingerprint.from_line(line)


# -- the quiet beat on etcd, through `looop pulse` -------------------------------------------


def test_another_hosts_claim_breaks_the_seal_and_then_stays_quiet_while_held(
    two: Hosts,
) -> None:
    """A claim is work in play: seen by one full beat, then quiet while it is held (its
    lease kept by b's keeper), and its release seen at once."""
    a, b = _sealed(_host(two, "a")), _host(two, "b")
    assert _pulse(a).get("sealed") is True
    held = run_looop("-C", str(b.root), "claim", "repo", "--session", "s1", "--ttl", "600")
    assert held.returncode == 0, held.stderr
    seen = _pulse(a)
    assert seen.get("sealed") is None and seen["outcome"] != "skipped", seen
    assert "snap:sys-claims" in _changed(seen), seen
    assert _sealed(a) and _pulse(a).get("sealed") is True  # the claim still held: quiet
    gone = run_looop("-C", str(b.root), "unclaim", "repo", "--session", "s1")
    assert gone.returncode == 0, gone.stderr
    seen = _pulse(a)
    assert seen.get("sealed") is None and "snap:sys-claims" in _changed(seen), seen


def test_a_claims_own_ttl_ends_the_seal_when_it_runs_out(two: Hosts) -> None:
    a, b = _sealed(_host(two, "a")), _host(two, "b")
    taken = time.time()
    held = run_looop("-C", str(b.root), "claim", "ci", "--session", "s2", "--ttl", "120")
    assert held.returncode == 0, held.stderr
    _sealed(a)
    until = float((a.state / "quiet-seal").read_text().split("\n")[2].split(" ")[1])
    assert taken < until <= time.time() + 120  # the seal lasts no longer than the claim


def test_a_record_rewritten_with_the_same_bytes_breaks_the_seal(two: Hosts) -> None:
    a = _sealed(_host(two, "a"))
    assert two.cluster is not None
    client = _client(two.cluster)
    key = f"{two.prefix}/data/world/meta"  # the committed world's record (coord/worldstore.py)
    [kv] = client.get(key)
    from looop_py.coord.etcd import value_of

    _kv(client, key, value_of(kv))
    beat = _pulse(a)
    assert beat.get("sealed") is None and beat["outcome"] == "skipped", beat  # read, same world


def test_a_sealed_host_cut_off_from_etcd_is_still_loud(alone: Hosts) -> None:
    """The quiet beat cannot ask etcd: the full beat runs and says why, exit 3."""
    assert alone.cluster is not None
    a = _sealed(_host(alone, "a"))
    alone.cluster.stop()
    cut = run_looop("-C", str(a.root), "pulse")
    assert cut.returncode == 3, (cut.stdout, cut.stderr)
    assert "etcd cannot be reached" in cut.stderr
    assert not (a.state / "quiet-seal").exists()


@pytest.fixture
def alone(tmp_path: Path) -> Iterator[Hosts]:
    """A cluster of its own: no other test's lease keeper sends requests to it."""
    root = Path(tempfile.mkdtemp(prefix="looop-etcd-", dir="/dev/shm"))
    cluster = Cluster(root).start()
    try:
        yield Hosts("etcd", tmp_path, cluster)
    finally:
        cluster.stop()
        close_opened()
        shutil.rmtree(root, ignore_errors=True)


def test_a_quiet_pulse_on_etcd_is_one_request_and_loads_no_http_library(alone: Hosts) -> None:
    two = alone
    assert two.cluster is not None
    a = _sealed(_host(two, "a"))
    before = _requests(two.cluster)
    beat = _pulse(a)
    quiet = _requests(two.cluster) - before
    assert beat.get("sealed") is True, beat
    assert quiet == 1, quiet
    (a.state / "quiet-seal").unlink()  # the same beat, full: for the figure
    before = _requests(two.cluster)
    assert _pulse(a).get("sealed") is None
    full = _requests(two.cluster) - before
    print(f"requests: quiet beat {quiet}, full skipped beat {full}", file=sys.stderr)
    assert full > quiet
    _sealed(a)
    loaded = {
        line.rsplit("|", 1)[1].strip()
        for line in _run_pulse(a).splitlines()
        if line.startswith("import time:")
    }
    assert _beats(a)[-1].get("sealed") is True
    assert ETCD_QUIET_MODULES | {"_socket", "_json", "binascii"} <= loaded  # the trace works
    assert "typing" not in loaded
    heavy = {"http.client", "email", "ssl", "tomllib", "looop_py.workdir.config"}
    heavy |= {"looop_py.coord.remote", "looop_py.beat.pulse", "etcd3gw", "requests"}
    assert not heavy & loaded, heavy & loaded
