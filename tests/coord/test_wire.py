"""The etcd client's transport (coord/wire.py, coord/etcd.Client) against hostile servers.

Each server is a real socket on 127.0.0.1 run by a thread, scripted per test:
one that never answers, one that hangs up on an idle kept-alive connection,
one that chunks its reply or lies about its length, one that speaks no HTTP,
one that refuses. The happy path against real etcd is every other test in
tests/coord/ (the contract suite on etcd).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from looop_py.coord import etcd
from looop_py.coord.etcd import Client, LeaseGone, put, value_of
from looop_py.coord.wire import MAX_BODY, Connection, WireError, split_url
from looop_py.errors import Unavailable, UsageError
from tests.conftest import wait_for
from tests.etcdserver import free_port, need


@dataclass(frozen=True)
class Cfg:
    endpoints: tuple[str, ...]
    timeout_s: float = 0.5
    ca_cert: str = ""
    cert_cert: str = ""
    cert_key: str = ""
    username: str = ""
    password_env: str = ""


class Peer:
    """One accepted connection, as a scripted server sees it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def request(self) -> tuple[str, dict[str, str], bytes] | None:
        """(request line, headers, body), or None when the client hung up."""
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buf += data
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        line, *rest = head.decode().split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in rest)}
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self.buf += self.sock.recv(65536)
        body, self.buf = self.buf[:n], self.buf[n:]
        return line, headers, body

    def reply(self, status: int, body: bytes, *, extra: str = "") -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
        self.sock.sendall(head.encode() + body)


class Server:
    """A listening socket; `handle(peer)` runs for each connection in its own thread."""

    def __init__(self, handle: Callable[[Peer], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.handle = handle
        self.accepted = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self._stop = False

    def serve(self) -> None:
        while not self._stop:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._run, args=(sock,), daemon=True).start()

    def _run(self, sock: socket.socket) -> None:
        with sock, suppress(OSError):
            self.handle(Peer(sock))

    def stop(self) -> None:
        self._stop = True
        self.listener.close()


@contextmanager
def serving(handle: Callable[[Peer], None]) -> Iterator[Server]:
    server = Server(handle)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop()


def answering(server_requests: list[tuple[str, dict[str, str], bytes]]) -> Callable[[Peer], None]:
    """Answer every request on the connection with {"header": {"revision": "N"}}."""

    def handle(peer: Peer) -> None:
        while (req := peer.request()) is not None:
            server_requests.append(req)
            peer.reply(
                200, json.dumps({"header": {"revision": str(len(server_requests))}}).encode()
            )

    return handle


# -- rainy days first --------------------------------------------------------------------


def test_a_server_that_never_answers_is_unavailable_within_the_timeout() -> None:
    held = threading.Event()

    def silent(peer: Peer) -> None:
        peer.request()
        held.wait(10)  # reads the request, answers nothing

    with serving(silent) as server:
        client = Client(Cfg((server.url,), timeout_s=0.3))
        start = time.monotonic()
        with pytest.raises(Unavailable, match="timed out"):
            client.post("/kv/range", {"key": "YQ=="})
        assert time.monotonic() - start < 3
        held.set()


def test_a_refused_endpoint_fails_over_to_the_next_and_sticks_with_it() -> None:
    seen: list[tuple[str, dict[str, str], bytes]] = []
    dead = f"http://127.0.0.1:{free_port()}"
    with serving(answering(seen)) as server:
        client = Client(Cfg((dead, server.url)))
        for _ in range(3):
            client.post("/kv/range", {"key": "YQ=="})
        assert len(seen) == 3
        assert server.accepted == 1  # one connection, kept alive across the three


def test_no_endpoint_answering_names_the_last_reason() -> None:
    client = Client(Cfg((f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}")))
    with pytest.raises(Unavailable, match="cannot be reached") as caught:
        client.post("/kv/range", {"key": "YQ=="})
    assert "refused" in caught.value.message.lower()


def test_a_kept_connection_the_server_closed_while_idle_is_replaced_before_sending() -> None:
    """The server hangs up after each reply (an idle timeout): every request is still
    written exactly once, on a fresh connection, and answered."""
    seen: list[tuple[str, dict[str, str], bytes]] = []

    def one_then_hang_up(peer: Peer) -> None:
        req = peer.request()
        if req is not None:
            seen.append(req)
            peer.reply(200, b"{}")
        peer.sock.shutdown(socket.SHUT_RDWR)

    with serving(one_then_hang_up) as server:
        conn = Connection(server.url, timeout_s=1)
        for i in range(4):
            wait_for(lambda: _closed_by_peer(conn), 5, "the hang-up to reach this side")
            assert conn.post("/v3/kv/put", b'{"n":%d}' % i) == (200, b"{}")
        assert [body for _, _, body in seen] == [b'{"n":%d}' % i for i in range(4)]
        assert server.accepted == 4


def _closed_by_peer(conn: Connection) -> bool:
    sock = conn._sock
    if sock is None:
        return True
    import select

    return bool(select.select([sock], [], [], 0)[0])


def test_a_reply_cut_short_is_an_error_not_a_shorter_body() -> None:
    def liar(peer: Peer) -> None:
        peer.request()
        peer.sock.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"a":')
        peer.sock.shutdown(socket.SHUT_RDWR)

    with serving(liar) as server, pytest.raises(WireError, match="closed"):
        Connection(server.url, timeout_s=1).post("/v3/x", b"{}")


@pytest.mark.parametrize(
    "reply",
    [
        b"SSH-2.0-OpenSSH_9.2\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 200 + b"\r\n",
        b"HTTP/1.1 200 OK\r\nNoColonHere\r\n\r\n",
        b"HTTP/1.1 200 " + b"x" * 10000 + b"\r\n\r\n",
    ],
    ids=[
        "not-http",
        "negative-length",
        "too-long",
        "bad-chunk",
        "chunk-no-crlf",
        "header-flood",
        "no-colon",
        "long-line",
    ],
)
def test_a_reply_that_is_not_http_is_an_error_and_the_connection_dropped(reply: bytes) -> None:
    def hostile(peer: Peer) -> None:
        peer.request()
        peer.sock.sendall(reply)
        peer.request()  # keep the connection open: the client must be the one to drop it

    with serving(hostile) as server:
        conn = Connection(server.url, timeout_s=1)
        with pytest.raises(WireError):
            conn.post("/v3/x", b"{}")
        assert conn._sock is None


def test_an_answer_that_is_not_a_json_object_is_not_taken_as_one() -> None:
    def odd(peer: Peer) -> None:
        while peer.request() is not None:
            peer.reply(200, b"[1, 2]")

    with serving(odd) as server, pytest.raises(Unavailable, match="not a JSON object"):
        Client(Cfg((server.url,))).post("/kv/range", {})


def test_an_expired_lease_is_lease_gone_not_unavailable() -> None:
    def gone(peer: Peer) -> None:
        while peer.request() is not None:
            err = {"error": "etcdserver: requested lease not found", "code": 5}
            peer.reply(404, json.dumps(err).encode())

    with serving(gone) as server, pytest.raises(LeaseGone, match="lease not found"):
        Client(Cfg((server.url,))).post("/kv/txn", {})


def test_an_expired_auth_token_is_renewed_on_the_same_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """etcd forgot the token (restart, TTL): the client authenticates again and the request
    goes through on that endpoint; the password is read from the named variable only."""
    tokens = iter(["t1", "t2"])
    seen: list[tuple[str, str | None]] = []

    def auth(peer: Peer) -> None:
        while (req := peer.request()) is not None:
            line, headers, body = req
            seen.append((line.split(" ")[1], headers.get("authorization")))
            if line.startswith("POST /v3/auth/authenticate "):
                assert json.loads(body) == {"name": "looop", "password": "s3cret"}
                peer.reply(200, json.dumps({"token": next(tokens)}).encode())
            elif headers.get("authorization") == "t2":
                peer.reply(200, b'{"kvs": []}')
            else:
                peer.reply(401, b'{"error": "etcdserver: invalid auth token", "code": 16}')

    monkeypatch.setenv("ETCD_PW", "s3cret")
    with serving(auth) as server:
        client = Client(Cfg((server.url,), username="looop", password_env="ETCD_PW"))
        assert client.post("/kv/range", {}) == {"kvs": []}
        assert client.post("/kv/range", {}) == {"kvs": []}  # the renewed token kept
    assert seen == [
        ("/v3/auth/authenticate", None),
        ("/v3/kv/range", "t1"),
        ("/v3/auth/authenticate", None),
        ("/v3/kv/range", "t2"),
        ("/v3/kv/range", "t2"),
    ]


def test_a_password_variable_that_is_not_set_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ETCD_PW_UNSET", raising=False)
    client = Client(Cfg(("http://127.0.0.1:9",), username="u", password_env="ETCD_PW_UNSET"))
    with pytest.raises(UsageError, match="ETCD_PW_UNSET"):
        client.post("/kv/range", {})


@pytest.mark.parametrize(
    "url", ["127.0.0.1:2379", "ftp://a:1", "http://:80", "http://a:port", "https://"]
)
def test_an_endpoint_that_is_not_an_http_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        split_url(url)


# -- the happy path ------------------------------------------------------------------------


def test_a_chunked_reply_is_read_whole_and_the_connection_kept() -> None:
    body = json.dumps({"kvs": [{"key": "a" * 3000}]}).encode()

    def chunky(peer: Peer) -> None:
        while peer.request() is not None:
            parts = [body[i : i + 1000] for i in range(0, len(body), 1000)]
            out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            out += b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts)
            peer.sock.sendall(out + b"0\r\nX-Trailer: 1\r\n\r\n")

    with serving(chunky) as server:
        client = Client(Cfg((server.url,)))
        assert client.post("/kv/range", {}) == json.loads(body)
        assert client.post("/kv/range", {}) == json.loads(body)
        assert server.accepted == 1


def test_requests_from_two_threads_each_get_a_connection() -> None:
    """The lease keeper thread and the beat post at once: neither waits on the other's
    reply, and no reply goes to the wrong caller."""
    release = threading.Event()

    def echo(peer: Peer) -> None:
        while (req := peer.request()) is not None:
            n = json.loads(req[2])["n"]
            if n == 0:
                release.wait(5)  # the first caller's reply is held back
            peer.reply(200, json.dumps({"n": n}).encode())

    with serving(echo) as server:
        client = Client(Cfg((server.url,), timeout_s=5))
        got: list[dict[str, object]] = []
        slow = threading.Thread(target=lambda: got.append(client.post("/x", {"n": 0})))
        slow.start()
        assert client.post("/x", {"n": 1}) == {"n": 1}  # not stuck behind the held reply
        release.set()
        slow.join(5)
        assert got == [{"n": 0}]
        assert server.accepted == 2


def test_a_forked_child_opens_its_own_connection() -> None:
    import os

    seen: list[tuple[str, dict[str, str], bytes]] = []
    with serving(answering(seen)) as server:
        client = Client(Cfg((server.url,)))
        client.post("/x", {})
        pid = os.fork()
        if pid == 0:  # the child: post, and report by exit code
            try:
                client.post("/x", {})
                os._exit(0)
            except BaseException:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        client.post("/x", {})  # the parent's kept connection still works
        assert len(seen) == 3
        assert server.accepted == 2


# -- TLS, against real etcd ----------------------------------------------------------------


def _certs(folder: Path) -> dict[str, str]:
    """A throwaway CA, a server certificate for 127.0.0.1 and a client certificate."""

    def ssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=looop-test-ca")  # fmt: skip
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "")):
        ssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        (folder / f"{name}.ext").write_text(ext + "\n")
        sign = ["-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2"]
        extra = ["-extfile", f"{name}.ext"] if ext else []
        ssl("x509", "-req", "-in", f"{name}.csr", *sign, "-out", f"{name}.pem", *extra)
    return {n: str(folder / n) for n in ("ca.pem", "server.pem", "server.key", "client.pem",
                                         "client.key")}  # fmt: skip


@pytest.fixture
def tls_etcd(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    etcd = need()
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    certs = _certs(tmp_path)
    port, peer = free_port(), free_port()
    url = f"https://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [etcd, "--name", "tls", "--data-dir", str(tmp_path / "data"),
         "--listen-client-urls", url, "--advertise-client-urls", url,
         "--listen-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
         "--initial-cluster", f"tls=http://127.0.0.1:{peer}",
         "--cert-file", certs["server.pem"], "--key-file", certs["server.key"],
         "--client-cert-auth", "--trusted-ca-file", certs["ca.pem"]],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "etcd.log").open("wb"),
        start_new_session=True,
    )  # fmt: skip
    try:
        good = Cfg((url,), timeout_s=2, ca_cert=certs["ca.pem"],
                   cert_cert=certs["client.pem"], cert_key=certs["client.key"])  # fmt: skip
        wait_for(lambda: _answers(Client(good)), 30, "etcd over TLS to answer")
        yield url, certs
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _answers(client: Client) -> bool:
    try:
        client.post("/maintenance/status", {})
        return True
    except Unavailable:
        return False


@pytest.mark.etcd
def test_tls_refuses_an_unknown_server_and_a_client_without_its_certificate(
    tls_etcd: tuple[str, dict[str, str]],
) -> None:
    url, certs = tls_etcd
    with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
        Client(Cfg((url,), timeout_s=2)).post("/maintenance/status", {})  # the system's CAs
    no_cert = Client(Cfg((url,), timeout_s=2, ca_cert=certs["ca.pem"]))
    with pytest.raises(Unavailable):
        no_cert.post("/kv/range", {"key": "YQ=="})


@pytest.mark.etcd
def test_tls_with_a_client_certificate_reads_and_writes_on_one_connection(
    tls_etcd: tuple[str, dict[str, str]],
) -> None:
    url, certs = tls_etcd
    cfg = Cfg((url,), timeout_s=2, ca_cert=certs["ca.pem"], cert_cert=certs["client.pem"],
              cert_key=certs["client.key"])  # fmt: skip
    client = Client(cfg)
    ok, _ = client.txn([], [put("/looop/tls/a", b"x" * 5000)])  # a chunked reply back
    assert ok
    [kv] = client.get("/looop/tls/a")
    assert value_of(kv) == b"x" * 5000
    assert len(client.get("/looop/tls/", prefix=True)) == 1
    conn = client._endpoints[0]._idle[0]
    assert conn._sock is not None and conn._sock.version() is not None  # TLS, kept open


# -- the C halves the quiet beat on etcd speaks with (_socket, _json, binascii) -----------------


def test_a_host_name_is_resolved_and_an_unknown_one_is_unavailable() -> None:
    """`_socket` resolves the name itself (as bytes: no idna codec): localhost answers; a
    name nobody knows is Unavailable with the resolver's reason, not a crash."""
    seen: list[tuple[str, dict[str, str], bytes]] = []
    with serving(answering(seen)) as server:
        port = server.url.rsplit(":", 1)[1]
        Client(Cfg((f"http://localhost:{port}",))).post("/kv/range", {"key": "YQ=="})
        assert seen and seen[0][1]["host"] == f"localhost:{port}"
    with pytest.raises(Unavailable, match="cannot be reached"):
        Client(Cfg(("http://no-such-host.invalid:2379",))).post("/kv/range", {"key": "YQ=="})


ODD = [
    {"header": {"revision": "12", "raft_term": "3"}, "kvs": [], "count": "0", "more": False},
    {"succeeded": True, "responses": [{"response_range": {"count": "2"}}, {}]},
    {"nested": [[[]], {"a": [1, -2, 3.5, 1e300, None, True]}], "": ""},
    {"text": 'quote " backslash \\ tab \t newline \n nul \x00 é ☃ 𝄞 \ud800'},
    {"big": 2**63 - 1, "neg": -(2**63), "huge": 10**30, "float": 0.1 + 0.2},
    ["a", 1, None],
    "just a string",
    7,
]


@pytest.mark.parametrize("value", ODD)
def test_the_json_codec_writes_and_reads_what_the_json_package_does(value: object) -> None:
    text = json.dumps(value, separators=(",", ":"))
    assert etcd.dumps(value) == text
    assert etcd.loads(text) == json.loads(text) == value
    assert etcd.loads(text.encode() if text.isascii() else text) == json.loads(text)
    assert etcd.loads(f" \n{text}\r\n\t") == json.loads(text)


@pytest.mark.parametrize(
    "text", ["", " ", "{", '{"a":1} x', "[1,]", "{'a':1}", b"\xff\xfe", "nul", '"\\x"', "1 2"]
)
def test_text_that_is_not_one_json_value_is_a_value_error(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        etcd.loads(text)
    with pytest.raises(ValueError):
        json.loads(text)


def test_nan_and_infinity_read_and_write_as_the_json_package_does() -> None:
    for text in ("NaN", "Infinity", "-Infinity", "[NaN,1]"):
        assert repr(etcd.loads(text)) == repr(json.loads(text))
    odd = [float("nan"), float("inf"), float("-inf")]
    assert etcd.dumps(odd) == json.dumps(odd, separators=(",", ":"))
    with pytest.raises(TypeError):
        etcd.dumps({"a": object()})


def test_base64_is_the_base64_modules() -> None:
    for raw in (b"", b"a", b"ab", b"abc", bytes(range(256)), "é/claims/☃".encode()):
        assert etcd._b64(raw) == base64.b64encode(raw).decode()
        assert etcd.unb64(etcd._b64(raw)) == raw == base64.b64decode(base64.b64encode(raw))
    assert etcd._b64("P/claims/x") == base64.b64encode(b"P/claims/x").decode()
