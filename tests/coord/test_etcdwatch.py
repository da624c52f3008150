"""The etcd watch `looop up` waits on for records other hosts write (coord/etcdwatch.py).

A real etcd on loopback. The rainy cases come first: a stream that is not etcd's,
an endpoint that is down, a connection cut mid-stream (through a TCP proxy the test
cuts), writes made while the stream was down, and a gap etcd has compacted away.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from looop_py.coord.etcd import Client
from looop_py.coord.etcdwatch import RecordWatch, key_range
from tests.conftest import open_wd, wait_for
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_shared_records import Hosts
from tests.coord.test_shared_records import two as two  # noqa: PLC0414 - the fixture
from tests.etcdserver import Cluster, free_port

pytestmark = pytest.mark.etcd


def client(*endpoints: str) -> Client:
    cfg = SimpleNamespace(
        endpoints=tuple(endpoints),
        timeout_s=2.0,
        ca_cert="",
        cert_cert="",
        cert_key="",
        username="",
        password_env="",
    )
    return Client(cfg)  # type: ignore[arg-type]


def put(cluster: Cluster, key: str) -> int:
    """Write a key straight into etcd (as another host would); the revision it made."""
    body = {"key": base64.b64encode(key.encode()).decode(), "value": "eA=="}
    req = urllib.request.Request(
        cluster.endpoints[0] + "/v3/kv/put", data=json.dumps(body).encode()
    )
    with urllib.request.urlopen(req, timeout=5) as r:
        return int(json.loads(r.read())["header"]["revision"])


class Changes:
    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            self.count += 1


class Proxy:
    """A TCP proxy on loopback to one endpoint; `cut()` resets every connection through it."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.server.accept()
            except OSError:
                return
            up = socket.create_connection(self.target)
            self.accepted += 1
            self.conns += [down, up]
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        conns, self.conns = self.conns, []
        for s in conns:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self.server.close()
        self.cut()


@pytest.fixture
def prefix() -> str:
    return f"/looop/watch-{uuid.uuid4().hex[:10]}/data/"


@pytest.fixture
def proxy(etcd: Cluster) -> Iterator[Proxy]:
    p = Proxy(etcd.endpoints[0])
    yield p
    p.close()


def watching(c: Client, prefix: str, changes: Changes, **kw: float) -> RecordWatch:
    kinds = [f"{prefix}{kind}/" for kind in ("asks", "answers", "approved")]
    w = RecordWatch(c, kinds, changes, **kw).start()
    wait_for(lambda: w.opened >= 1, timeout=10, what="the watch to be created")
    return w


def cut_while_watching(proxy: Proxy, prefix: str, changes: Changes) -> RecordWatch:
    """A watch through `proxy` whose stream was just cut: it waits 1.5 s before reopening."""
    w = watching(client(proxy.url), prefix, changes, backoff_s=1.5)
    proxy.cut()
    wait_for(lambda: len(w.failures) == 1, timeout=10, what="the watch to see the cut")
    return w


def test_the_range_holds_every_kind_and_no_more() -> None:
    start, end = key_range(["P/data/asks/", "P/data/answers/", "P/data/approved/"])
    assert (start, end) == ("P/data/answers/", "P/data/asks0")
    for key in ("P/data/answers/a", "P/data/approved/x", "P/data/asks/zz"):
        assert start <= key < end
    for key in ("P/data/forged/a", "P/data/rounds/r", "P/data/world/meta", "P/data/answers"):
        assert not start <= key < end


def test_a_stream_that_is_not_etcds_is_retried_with_backoff_and_wakes_nothing() -> None:
    """An endpoint that answers 200, chunked, with a line that is not JSON, then hangs up."""
    server = socket.create_server(("127.0.0.1", 0))
    served: list[float] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            served.append(time.monotonic())
            with conn:
                conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    b"d\r\nnot json at a\r\n2\r\nll\r\n1\r\n\n\r\n"
                )

    threading.Thread(target=serve, daemon=True).start()
    changes = Changes()
    w = RecordWatch(client(f"http://127.0.0.1:{server.getsockname()[1]}"), ["P/a/"], changes)
    w.start()
    try:
        wait_for(lambda: len(served) >= 3, timeout=10, what="three attempts")
        time.sleep(0.5)  # a retry storm would make dozens of attempts by now
    finally:
        w.close()
        server.close()
    gaps = [b - a for a, b in itertools.pairwise(served)]
    assert len(served) <= 5, f"{len(served)} attempts in {served[-1] - served[0]:.2f} s"
    assert all(later >= earlier for earlier, later in itertools.pairwise(gaps))
    assert changes.count == 0
    assert "not a JSON object" in w.failures[0]
    assert "not json at all" in w.failures[0]  # the line, quoted


def test_an_endpoint_that_is_down_is_passed_over_for_the_next(etcd: Cluster, prefix: str) -> None:
    changes = Changes()
    w = watching(client(f"http://127.0.0.1:{free_port()}", etcd.endpoints[0]), prefix, changes)
    try:
        put(etcd, f"{prefix}answers/a1")
        wait_for(lambda: changes.count == 1, timeout=10, what="the answer to be seen")
    finally:
        w.close()
    assert "refused" in w.failures[0].lower(), w.failures


def test_only_the_watched_kinds_wake(etcd: Cluster, prefix: str) -> None:
    changes = Changes()
    w = watching(client(etcd.endpoints[0]), prefix, changes)
    try:
        for key in ("forged/f", "world/meta", "rounds/r1", "answers"):
            put(etcd, prefix + key)
        put(etcd, f"{prefix}approved/move-1")  # the last: once it is seen, the rest were
        wait_for(lambda: changes.count >= 1, timeout=10, what="the approval to be seen")
        time.sleep(0.2)
    finally:
        w.close()
    assert changes.count == 1


def test_what_was_written_while_the_stream_was_cut_is_not_missed(
    etcd: Cluster, proxy: Proxy, prefix: str
) -> None:
    changes = Changes()
    w = cut_while_watching(proxy, prefix, changes)
    put(etcd, f"{prefix}asks/q1")  # while it waits to reopen: only start_revision brings it
    try:
        wait_for(lambda: w.opened == 2, timeout=10, what="the watch to reopen")
        wait_for(lambda: changes.count == 1, timeout=10, what="the ask written meanwhile")
    finally:
        w.close()
    assert proxy.accepted == 2


def test_a_gap_etcd_compacted_away_counts_as_one_change(
    etcd: Cluster, proxy: Proxy, prefix: str
) -> None:
    changes = Changes()
    w = cut_while_watching(proxy, prefix, changes)
    put(etcd, f"{prefix}other/o1")  # outside the range; the next revision it would read
    revision = put(etcd, f"{prefix}other/o2")  # from is compacted away below this one
    body = json.dumps({"revision": str(revision), "physical": True}).encode()
    req = urllib.request.Request(etcd.endpoints[0] + "/v3/kv/compaction", data=body)
    urllib.request.urlopen(req, timeout=5).read()
    try:
        wait_for(lambda: changes.count == 1, timeout=10, what="the compacted gap")
        wait_for(lambda: w.opened == 3, timeout=10, what="a fresh watch after the gap")
        put(etcd, f"{prefix}answers/a2")
        wait_for(lambda: changes.count == 2, timeout=10, what="an answer after the gap")
    finally:
        w.close()


def looop_process(
    root: Path, *args: str, stdout: int, stderr: int = subprocess.PIPE
) -> subprocess.Popen[str]:
    """`looop -C ROOT ARGS…` in a process of its own, as a user starts it."""
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    argv = [sys.executable, "-m", "looop_py", "-C", str(root), *args]
    return subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr, text=True)


def grpc_calls(cluster: Cluster) -> dict[str, int]:
    with urllib.request.urlopen(cluster.endpoints[0] + "/metrics", timeout=5) as r:
        text = r.read().decode()
    found: dict[str, int] = {}
    for m in re.finditer(r'grpc_server_handled_total\{[^}]*grpc_method="(\w+)"[^}]*\} (\d+)', text):
        found[m.group(1)] = found.get(m.group(1), 0) + int(m.group(2))
    return found


@pytest.mark.timeout(60)
def test_an_idle_looop_up_asks_etcd_nothing_and_hears_another_hosts_answer(
    two: Hosts,
) -> None:
    from looop_py.asks import mailbox
    from tests.ops.test_resident import beats

    a, b = two.workdir("a"), two.workdir("b")
    ask = mailbox.open_ask(open_wd(a), prompt="go?", asker="decider", now=time.time())
    quiet = subprocess.DEVNULL
    up = looop_process(a.root, "up", "--interval", "3600", stdout=quiet, stderr=quiet)
    try:
        wait_for(lambda: beats(a) >= 1, timeout=20, what="the first beat")
        time.sleep(0.5)  # the beat's own writes have woken it, or not
        settled = beats(a)
        before = grpc_calls(two.cluster)  # type: ignore[arg-type]
        time.sleep(3)  # idle: the poll this replaced asked 3 ranges a second
        idle = grpc_calls(two.cluster)  # type: ignore[arg-type]
        assert beats(a) == settled
        mailbox.answer(open_wd(b), ask.id, "yes", now=time.time())  # on host b
        wait_for(lambda: beats(a) > settled, timeout=5, what="host a's beat after b's answer")
    finally:
        up.kill()
        up.wait()
    assert idle.get("Range", 0) - before.get("Range", 0) == 0, (before, idle)
    assert idle.get("Txn", 0) - before.get("Txn", 0) == 0, (before, idle)


@pytest.mark.timeout(60)
def test_a_waiting_looop_ask_asks_etcd_nothing_until_the_answer_comes(two: Hosts) -> None:
    """`looop ask` on host a waits on the watch (it looked twice every 0.2 s before)."""
    from looop_py.asks import mailbox

    a, b = two.workdir("a"), two.workdir("b")
    asking = looop_process(a.root, "ask", "--prompt", "ship it?", stdout=subprocess.PIPE)
    try:
        wait_for(lambda: mailbox.pending(open_wd(b)), timeout=20, what="the ask on host b")
        (ask,) = mailbox.pending(open_wd(b))
        wait_for(lambda: mailbox.get_ask(open_wd(b), ask.id).waiter, timeout=10, what="waiter")
        time.sleep(0.5)  # into its wait
        before = grpc_calls(two.cluster)  # type: ignore[arg-type]
        time.sleep(2)
        idle = grpc_calls(two.cluster)  # type: ignore[arg-type]
        mailbox.answer(open_wd(b), ask.id, "yes, ship", now=time.time())
        out, err = asking.communicate(timeout=5)
    finally:
        asking.kill()
    assert asking.returncode == 0, err
    assert "yes, ship" in out
    assert idle.get("Range", 0) - before.get("Range", 0) == 0, (before, idle)


@pytest.mark.timeout(60)
def test_looop_wait_only_asks_waits_on_the_watch_and_returns_for_another_hosts_ask(
    two: Hosts,
) -> None:
    from looop_py.asks import mailbox

    a, b = two.workdir("a"), two.workdir("b")
    open_wd(a).shelf.names("asks")  # the prefix checked in before anyone waits
    waiting = looop_process(a.root, "wait", "--only-asks", "--json", stdout=subprocess.PIPE)
    try:
        time.sleep(2.5)  # started, looked once, and waiting
        before = grpc_calls(two.cluster)  # type: ignore[arg-type]
        time.sleep(2)
        idle = grpc_calls(two.cluster)  # type: ignore[arg-type]
        assert waiting.poll() is None
        ask = mailbox.open_ask(open_wd(b), prompt="deploy?", asker="human", now=time.time())
        out, _ = waiting.communicate(timeout=5)
    finally:
        waiting.kill()
    assert waiting.returncode == 0
    assert json.loads(out)["items"][0]["id"] == ask.id
    assert idle.get("Range", 0) - before.get("Range", 0) == 0, (before, idle)
