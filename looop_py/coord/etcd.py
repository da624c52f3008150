"""etcd v3 over its JSON gateway (`/v3/...`), on coord/wire.py's kept-alive connections.

Loaded only when looop.toml says backend = "etcd" (coord/choose.py), and by a
quiet beat on etcd (coord/etcdseal.py), so it imports little: no JSON library
beyond the standard one, no HTTP library (coord/wire.py says why). A Client
sends each request to the configured endpoints in turn until one answers (a
member without a leader or quorum counts as not answering), authenticates when
`username` is set, and raises Unavailable when none answers; the helpers below
build transaction parts. coord/remote.py keeps claims, fencing and the pulse
on it, as these keys under the prefix P:

    P/claims/<name>    the claim (claims/<name>.json's fields, plus host and lease),
                       attached to its holder's lease (a loop round's has none); its
                       create revision is the epoch (the fencing token): etcd's own,
                       above every earlier holder's, and nothing is left after release
    P/hosts/<id>/<lease>  a host id in use, with its machine's identity, on the lease
                       of the process using it (two machines under one id are refused)
    P/leases/<host>/<pid>-<t>  the lease a holder process's claims ride on, attached to
                       it and kept alive by that holder's keeper (coord/keeper.py)
    P/data/<key>       shared state that fenced_put wrote (the committed world)
    P/data/<kind>/<name>  the shared records (workdir/shelf.py): asks, answers, rounds,
                       timers … (coord/etcdshelf.py)

"""

from __future__ import annotations

import _thread
import binascii
import os
import time

from looop_py.coord.wire import Connection, WireError
from looop_py.errors import Unavailable, UsageError

try:  # the C half of json (what json.loads and json.dumps call), without json's `re`
    import _json
except ImportError:  # an interpreter without it: the json package
    _json = None  # type: ignore[assignment]

# typing is not imported at run time: the quiet beat on etcd loads this module (and so no
# json, base64, threading or contextlib either: with socket's, ~12 ms of its CPU time).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, Protocol

    class Settings(Protocol):
        """What a Client reads of `[coordination]` (workdir/config.CoordinationConfig)."""

        @property
        def endpoints(self) -> tuple[str, ...]: ...
        @property
        def timeout_s(self) -> float: ...
        @property
        def ca_cert(self) -> str: ...
        @property
        def cert_cert(self) -> str: ...
        @property
        def cert_key(self) -> str: ...
        @property
        def username(self) -> str: ...
        @property
        def password_env(self) -> str: ...


API = "/v3"


def _b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return binascii.b2a_base64(raw, newline=False).decode("ascii")  # base64.b64encode's


def unb64(text: str) -> bytes:
    return binascii.a2b_base64(text)  # base64.b64decode's (non-alphabet bytes dropped)


_C_JSON: Any = _json  # None: use the json package


class _Decoding:
    """What json's C scanner reads of a json.JSONDecoder (its defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(
        {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    )


def _unencodable(value: Any) -> Any:
    raise TypeError(f"not JSON: {type(value).__name__}")


def dumps(value: Any) -> str:
    """json.dumps(value, separators=(",", ":"))."""
    if _C_JSON is None:
        import json  # an interpreter without _json only

        return json.dumps(value, separators=(",", ":"))
    quote = _C_JSON.encode_basestring_ascii  # ensure_ascii, as json.dumps by default
    encode = _C_JSON.make_encoder({}, _unencodable, quote, None, ":", ",", False, False, True)
    return "".join(encode(value, 0))


def loads(text: str | bytes) -> Any:
    """json.loads(text): ValueError when it is not one JSON value."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # etcd speaks UTF-8 (UnicodeDecodeError: a ValueError)
    if _C_JSON is None:
        import json  # an interpreter without _json only

        return json.loads(text)
    text = text.strip(" \t\n\r")  # JSON's whitespace, as json's decoder skips it
    try:
        value, end = _C_JSON.make_scanner(_Decoding())(text, 0)
    except StopIteration:
        raise ValueError("no JSON value") from None
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return value


class LeaseGone(Exception):
    """A put named a lease etcd no longer has (it expired): grant a new one and retry."""


class _Refused(Exception):
    """The endpoint answered, but not with a result (an error body); the text says what."""


class Endpoint:
    """One endpoint's idle connections (a thread takes one, or opens one, per request)
    and its auth token."""

    def __init__(self, url: str, cfg: Settings) -> None:
        self.url = url
        self.cfg = cfg
        self.token: str | None = None
        self._idle: list[Connection] = []
        self._lock = _thread.allocate_lock()

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """The endpoint's JSON answer; WireError if it did not answer, _Refused if it
        answered with an error."""
        data = dumps(body).encode()
        headers = {"Authorization": self.token} if self.token else None
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connection()
        status, reply = conn.post(API + path, data, headers)  # a WireError closed it
        with self._lock:
            self._idle.append(conn)
        text = reply.decode("utf-8", "replace")
        if status != 200:
            raise _Refused(_error_text(status, text))
        found = _object(text)
        if found is None:
            raise _Refused(f"HTTP 200 with a body that is not a JSON object: {text[:80]!r}")
        return found

    def _connection(self) -> Connection:
        c = self.cfg
        return Connection(
            self.url,
            timeout_s=c.timeout_s,
            ca_cert=c.ca_cert,
            cert_cert=c.cert_cert,
            cert_key=c.cert_key,
        )

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def stream(
        self,
        path: str,
        body: dict[str, Any],
        *,
        idle_s: float,
        opened: Callable[[Connection], None],
    ) -> Iterator[dict[str, Any]]:
        """Each JSON object of a reply that streams (a watch), on a connection of its own
        (handed to `opened` first, so another thread can close it); WireError if it broke,
        _Refused if etcd answered with an error."""
        conn = self._connection()
        opened(conn)
        headers = {"Authorization": self.token} if self.token else None
        data = dumps(body).encode()
        for line in conn.stream(API + path, data, headers, idle_s=idle_s):
            found = _object(line)
            if found is None:
                raise WireError(f"a streamed line that is not a JSON object: {line[:80]!r}")
            if "error" in found:
                error = found["error"]
                text = error.get("message", error) if isinstance(error, dict) else error
                raise _Refused(f"etcd ended the stream: {text}"[:200])
            yield found


def _object(text: str | bytes) -> dict[str, Any] | None:
    """The JSON object `text` holds; None when it is not JSON, or not an object."""
    try:
        found = loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _error_text(status: int, text: str) -> str:
    """The gateway's `{"error"/"message": …}` as one line, with the HTTP status."""
    try:
        found = loads(text)
    except ValueError:
        found = None
    if isinstance(found, dict):
        text = str(found.get("message") or found.get("error") or text)
    return f"HTTP {status}: {text}".replace("\n", " ")[:200]


class Client:
    """A kept-alive connection per endpoint; a request goes to the first that answers."""

    def __init__(self, cfg: Settings) -> None:
        self.cfg = cfg
        self._pid = os.getpid()
        self._endpoints = [Endpoint(url, cfg) for url in cfg.endpoints]
        self._at = 0

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request, to each endpoint in turn until one answers; Unavailable if none does."""
        return self.post_timed(path, body)[0]

    def post_timed(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """`post`, and when (time.monotonic()) the attempt that was answered was sent: a
        lease renewed by it lives at least TTL from then (coord/remote.py's renew deadline)."""
        if self._pid != os.getpid():  # a forked child: never share the parent's connections
            self._pid = os.getpid()
            self._endpoints = [Endpoint(url, self.cfg) for url in self.cfg.endpoints]
        n = len(self._endpoints)
        why = "no endpoint"
        for step in range(n):
            i = (self._at + step) % n
            endpoint = self._endpoints[i]
            for _ in range(2):  # twice only when its auth token had expired
                sent = time.monotonic()
                try:
                    self._authenticate(endpoint)
                    found = endpoint.post(path, body)
                except WireError as exc:
                    why = f"{endpoint.url}: {exc}"
                    break
                except _Refused as exc:
                    text = str(exc)
                    if "lease not found" in text:
                        raise LeaseGone(text) from exc
                    why = f"{endpoint.url}: {text}"  # no leader, timed out …: try another
                    if "invalid auth token" in text and endpoint.token:
                        endpoint.token = None  # authenticate again, here
                        continue
                    break
                self._at = i
                return found, sent
        raise Unavailable(
            f"etcd cannot be reached or has no quorum ({why})",
            "nothing was decided; this runs again once etcd answers (looop never falls back to"
            " files)",
        )

    def _authenticate(self, endpoint: Endpoint) -> None:
        if not self.cfg.username or endpoint.token:
            return
        password = os.environ.get(self.cfg.password_env)
        if password is None:
            raise UsageError(
                f"coordination.password_env: ${self.cfg.password_env} is not set",
                "export the etcd password in that variable",
            )
        found = endpoint.post(
            "/auth/authenticate", {"name": self.cfg.username, "password": password}
        )
        endpoint.token = str(found.get("token", "")) or None

    def endpoints(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        """Each endpoint asked on its own (`looop doctor`): (url, why it did not answer or
        None, its /maintenance/status: leader, revision, dbSize …)."""
        found: list[tuple[str, str | None, dict[str, Any]]] = []
        for endpoint in self._endpoints:
            try:
                self._authenticate(endpoint)
                status = endpoint.post("/maintenance/status", {})
            except (WireError, _Refused) as exc:
                found.append((endpoint.url, str(exc), {}))
                continue
            found.append((endpoint.url, None, status))
        return found

    def watch(
        self,
        body: dict[str, Any],
        *,
        attempt: int,
        idle_s: float,
        opened: Callable[[Connection], None],
    ) -> Iterator[dict[str, Any]]:
        """Each response of one watch (`body`: its create_request), on endpoint number
        `attempt` (modulo their count: a caller that reopens after a failure moves on to
        the next); Unavailable when it could not be opened or broke, saying why."""
        endpoint = self._endpoints[attempt % len(self._endpoints)]
        try:
            self._authenticate(endpoint)
            for found in endpoint.stream("/watch", body, idle_s=idle_s, opened=opened):
                yield found.get("result") or {}
        except (WireError, _Refused) as exc:
            if "invalid auth token" in str(exc):
                endpoint.token = None  # authenticate again on the next attempt
            raise Unavailable(f"the watch on {endpoint.url} ended: {exc}") from exc

    def close(self) -> None:
        """Close the kept connections (a later request opens new ones)."""
        for endpoint in self._endpoints:
            endpoint.close()

    def never_compacted(self, key: str) -> bool:
        """Whether revision 1 is still kept (the cluster was never compacted), read at `key`."""
        try:
            self.post("/kv/range", {"key": _b64(key), "revision": 1, "keys_only": True})
        except Unavailable as exc:
            if "compacted" in exc.message:
                return False
            raise
        return True

    # -- the few calls looop makes -----------------------------------------------------

    def txn(
        self,
        compare: list[dict[str, Any]],
        success: list[dict[str, Any]],
        failure: list[dict[str, Any]] | None = None,
    ) -> tuple[bool, list[dict[str, Any]]]:
        body = {"compare": compare, "success": success, "failure": failure or []}
        found = self.post("/kv/txn", body)
        return bool(found.get("succeeded")), list(found.get("responses", []))

    def txn_revision(
        self, compare: list[dict[str, Any]], success: list[dict[str, Any]]
    ) -> tuple[bool, int]:
        """A transaction, and the store's revision after it (a put's create revision)."""
        found = self.post("/kv/txn", {"compare": compare, "success": success, "failure": []})
        return bool(found.get("succeeded")), int(found.get("header", {}).get("revision", 0))

    def get(
        self, key: str, *, prefix: bool = False, limit: int = 0, keys_only: bool = False
    ) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"key": _b64(key)}
        if prefix:
            end = key.encode()[:-1] + bytes([key.encode()[-1] + 1])
            body["range_end"] = _b64(end)
        if limit:
            body["limit"] = limit
        if keys_only:
            body["keys_only"] = True
        return list(self.post("/kv/range", body).get("kvs", []))

    def grant(self, ttl: int) -> tuple[int, float]:
        """A new lease, and when the request that granted it was sent."""
        found, sent = self.post_timed("/lease/grant", {"TTL": ttl, "ID": 0})
        return int(found["ID"]), sent

    def refresh(self, lease: int) -> tuple[int, float]:
        """The lease's new TTL (0 or less when it is gone), and when the request was sent."""
        found, sent = self.post_timed("/lease/keepalive", {"ID": lease})
        return int(found.get("result", {}).get("TTL", -1)), sent

    def revoke(self, lease: int) -> None:
        try:
            self.post("/kv/lease/revoke", {"ID": lease})
        except LeaseGone:
            pass


# -- transaction parts ---------------------------------------------------------------------

_FIELD = {"CREATE": "create_revision", "MOD": "mod_revision", "VERSION": "version"}


def cmp(key: str, target: str, result: str, value: int | str) -> dict[str, Any]:
    if target == "VALUE":
        return {"key": _b64(key), "target": "VALUE", "result": result, "value": _b64(str(value))}
    return {"key": _b64(key), "target": target, "result": result, _FIELD[target]: str(value)}


def cmp_value(key: str, value: bytes) -> dict[str, Any]:
    """The key holds exactly these bytes."""
    return {"key": _b64(key), "target": "VALUE", "result": "EQUAL", "value": _b64(value)}


def put(key: str, value: bytes, lease: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def rng(key: str) -> dict[str, Any]:
    return {"request_range": {"key": _b64(key)}}


def delete(key: str) -> dict[str, Any]:
    return {"request_delete_range": {"key": _b64(key)}}


def value_of(kv: dict[str, Any]) -> bytes:
    return unb64(kv.get("value", ""))
