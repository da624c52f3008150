"""HTTP/1.1 POSTs on kept-alive connections: how looop speaks to etcd's v3 JSON gateway.

The standard library's socket (and ssl, only for an https endpoint), not
http.client: importing http.client loads the email package, ~21 ms, more than
the rest of a quiet beat's own imports, and etcd3gw (requests, urllib3,
futurist) cost ~114 ms. A plain http endpoint is spoken to on socket's C half
(`_socket`): `socket` itself loads enum, selectors and more, ~8 ms of a quiet
beat. One connection is kept per endpoint and reused while the server keeps it
open; one found closed (readable before a request is sent: the server hung up
while it was idle) is replaced before sending, so a request is written at most
once per `post`. A reply is read by its Content-Length, or chunk by chunk (Go's
server chunks a reply past 2 KB), within MAX_BODY and with `timeout_s` for the
connect and for every read and write. Whatever goes wrong below HTTP (refused,
reset, timed out, TLS, not HTTP) is a WireError, and the connection is dropped.
`stream` is the one request whose reply never ends (etcd's
watch): its connection is its own, read line by line as the chunks arrive.
"""

from __future__ import annotations

import _socket
import select

# typing is not imported at run time: the quiet beat on etcd loads this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl
    from collections.abc import Iterator

    Socket = _socket.socket  # socket.socket and ssl.SSLSocket are ones too

MAX_LINE = 8192  # a status or header line
MAX_HEADERS = 100
MAX_BODY = 64 << 20  # a reply larger than this is not etcd's
MAX_STREAM_LINE = 16 << 20  # one streamed message (a watch response) larger than this is not


class WireError(Exception):
    """The endpoint could not be reached or did not answer in HTTP; the text says why."""


def split_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of `http[s]://host[:port][/]`; ValueError for anything else."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"not an http or https URL: {url!r}")
    hostport = rest.split("/", 1)[0]
    if hostport.startswith("["):  # [::1]:2379
        host, _, tail = hostport[1:].partition("]")
        port = tail.removeprefix(":")
    else:
        host, _, port = hostport.partition(":")
    if not host or (port and not port.isdigit()):
        raise ValueError(f"no host or a bad port in {url!r}")
    return scheme, host, int(port) if port else 2379


class Connection:
    """One endpoint: a socket opened on first use and kept while the server keeps it."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        ca_cert: str = "",
        cert_cert: str = "",
        cert_key: str = "",
    ) -> None:
        self.url = url
        self.scheme, self.host, self.port = split_url(url)
        self.timeout_s = timeout_s
        self._tls = (ca_cert, cert_cert, cert_key)
        self._sock: Socket | None = None
        self._file: _Reader | None = None
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = f"{host}:{self.port}"

    def post(
        self, path: str, body: bytes, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """(HTTP status, reply body) of one POST; WireError when no reply was read."""
        try:
            sock, reader = self._open()
            sock.sendall(self._request(path, body, headers))
            status, reply, keep = reader.response()
        except (OSError, ValueError) as exc:
            self.close()
            raise WireError(_why(exc)) from exc
        if not keep:
            self.close()
        return status, reply

    def stream(
        self, path: str, body: bytes, headers: dict[str, str] | None = None, *, idle_s: float
    ) -> Iterator[bytes]:
        """Each line of a reply that streams (chunked, newline-delimited), as it arrives.

        WireError when the connection fails or the reply is not a 200 stream (its text
        says why); waits at most `idle_s` for each chunk. The connection is closed when
        the stream ends, and `close()` from another thread ends a wait for the next line.
        """
        try:
            sock, reader = self._open()
            sock.sendall(self._request(path, body, headers))
            status, fields = reader.head()
            if status != 200 or "chunked" not in fields.get("transfer-encoding", "").lower():
                reply = reader.body(fields).decode("utf-8", "replace")
                raise WireError(f"HTTP {status}: {reply}".replace("\n", " ")[:200])
            sock.settimeout(idle_s)
            pending = b""
            while (chunk := reader.chunk()) is not None:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                yield from (line for line in lines if line.strip())
                if len(pending) > MAX_STREAM_LINE:
                    raise ValueError("a streamed line past 16 MB")
        except (OSError, ValueError) as exc:
            raise WireError(_why(exc)) from exc
        finally:
            self.close()

    def _request(self, path: str, body: bytes, headers: dict[str, str] | None) -> bytes:
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {self._host_header}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *(f"{k}: {v}" for k, v in (headers or {}).items()),
        ]
        return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body

    def _open(self) -> tuple[Socket, _Reader]:
        if self._sock is not None and self._file is not None:
            if not _dropped(self._sock):
                return self._sock, self._file
            self.close()
        if self.scheme == "https":
            sock = self._tls_connect()
        else:
            sock = _connect(self.host, self.port, self.timeout_s)
        self._sock, self._file = sock, _Reader(sock)
        return sock, self._file

    def _tls_connect(self) -> Socket:
        import socket  # an https endpoint only: ssl wraps a socket.socket

        sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        try:
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            return self._context().wrap_socket(sock, server_hostname=self.host)
        except BaseException:
            sock.close()
            raise

    def _context(self) -> ssl.SSLContext:
        import ssl  # an https endpoint only

        ca_cert, cert_cert, cert_key = self._tls
        context = ssl.create_default_context(cafile=ca_cert or None)
        if cert_cert:
            context.load_cert_chain(cert_cert, cert_key or None)
        return context

    def close(self) -> None:
        sock, self._sock, self._file = self._sock, None, None
        if sock is not None:
            try:
                sock.shutdown(_socket.SHUT_RDWR)  # wakes a thread blocked reading it
            except OSError:
                pass
            try:
                sock.close()
            except OSError:
                pass


def _connect(host: str, port: int, timeout_s: float) -> Socket:
    """socket.create_connection on `_socket`: each address of `host` in turn, `timeout_s`
    for each connect. An ASCII name is resolved as bytes, so no idna codec is loaded."""
    name: str | bytes = host.encode("ascii") if host.isascii() else host
    error: OSError | None = None
    for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout_s)
            sock.connect(address)
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        return sock
    raise error or OSError(f"no address found for {host}")


def _dropped(sock: Socket) -> bool:
    """Readable while idle: the server closed it (or sent what nobody asked for)."""
    pending = getattr(sock, "pending", None)  # TLS: bytes already decrypted
    if pending is not None and pending():
        return True
    poller = select.poll()  # not select(): a descriptor past 1023 is fine
    poller.register(sock, select.POLLIN | select.POLLPRI)
    try:
        return bool(poller.poll(0))
    except OSError:
        return True


def _why(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text.replace("\n", " ")[:200]


class _Reader:
    """An HTTP/1.1 response off a socket, buffered (one recv per arriving segment)."""

    def __init__(self, sock: Socket) -> None:
        self.sock = sock
        self.buf = b""

    def _more(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionResetError("the server closed the connection")
        self.buf += data

    def line(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                found, self.buf = self.buf[:end], self.buf[end + 2 :]
                return found
            if len(self.buf) > MAX_LINE:
                raise ValueError("a header line past 8 KB: not an etcd reply")
            self._more()

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._more()
        found, self.buf = self.buf[:n], self.buf[n:]
        return found

    def response(self) -> tuple[int, bytes, bool]:
        """(status, body, whether the connection stays open)."""
        status, fields = self.head()
        keep = fields[":version"] == "HTTP/1.1" and fields.get("connection", "").lower() != "close"
        if (
            "content-length" not in fields
            and "chunked" not in fields.get("transfer-encoding", "").lower()
        ):
            keep = False  # delimited by the close (HTTP/1.0 style)
        return status, self.body(fields), keep

    def head(self) -> tuple[int, dict[str, str]]:
        """The status and the header fields (lower-case names; ":version" is the HTTP version)."""
        version, _, rest = self.line().decode("latin-1").partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ValueError(f"not an HTTP reply: {version[:40]!r}")
        fields: dict[str, str] = {":version": version}  # no header name holds a colon
        for _ in range(MAX_HEADERS + 1):
            raw = self.line()
            if not raw:
                break
            name, colon, value = raw.decode("latin-1").partition(":")
            if not colon:
                raise ValueError("a header line without a colon")
            fields[name.strip().lower()] = value.strip()
        else:
            raise ValueError(f"more than {MAX_HEADERS} header lines")
        return int(code), fields

    def body(self, fields: dict[str, str]) -> bytes:
        """The whole body the header fields announce."""
        if "chunked" in fields.get("transfer-encoding", "").lower():
            parts: list[bytes] = []
            total = 0
            while (part := self.chunk()) is not None:
                total += len(part)
                if total > MAX_BODY:
                    raise ValueError("a chunked reply past 64 MB")
                parts.append(part)
            return b"".join(parts)
        length = fields.get("content-length")
        if length is None:
            return self._until_closed()
        if not length.isdigit() or int(length) > MAX_BODY:
            raise ValueError(f"a Content-Length that is not a size: {length[:20]!r}")
        return self.exactly(int(length))

    def chunk(self) -> bytes | None:
        """The next chunk of a chunked body; None after the last (its trailers read)."""
        size_text = self.line().split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ValueError(f"a chunk size that is not hex: {size_text[:20]!r}") from None
        if size < 0 or size > MAX_BODY:
            raise ValueError("a chunk past 64 MB")
        if size == 0:
            while self.line():  # trailers, up to the blank line
                pass
            return None
        found = self.exactly(size)
        if self.exactly(2) != b"\r\n":
            raise ValueError("a chunk not ended by CRLF")
        return found

    def _until_closed(self) -> bytes:
        while True:
            if len(self.buf) > MAX_BODY:
                raise ValueError("a reply past 64 MB")
            data = self.sock.recv(65536)
            if not data:
                found, self.buf = self.buf, b""
                return found
            self.buf += data
