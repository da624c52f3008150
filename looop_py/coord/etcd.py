"""etcd v3 over its HTTP gateway: the one module that imports etcd3gw (the `etcd` extra).

Loaded only when looop.toml says backend = "etcd" (coord/choose.py). A Client
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

import base64
import contextlib
import os
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import etcd3gw
from etcd3gw import exceptions as etcd_errors

from looop_py.errors import Unavailable, UsageError

if TYPE_CHECKING:
    from looop_py.workdir.config import CoordinationConfig


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


class LeaseGone(Exception):
    """A put named a lease etcd no longer has (it expired): grant a new one and retry."""


class Client:
    """etcd3gw clients for each endpoint; a request goes to the first that answers."""

    def __init__(self, cfg: CoordinationConfig) -> None:
        self.cfg = cfg
        self._pid = os.getpid()
        self._clients = [self._client(url) for url in cfg.endpoints]
        self._at = 0

    def _client(self, url: str) -> etcd3gw.Etcd3Client:
        parts = urlsplit(url)
        return etcd3gw.client(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 2379,
            protocol=parts.scheme,
            ca_cert=self.cfg.ca_cert or None,
            cert_cert=self.cfg.cert_cert or None,
            cert_key=self.cfg.cert_key or None,
            timeout=self.cfg.timeout_s,
            api_path="/v3/",
        )

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """One request, to each endpoint in turn until one answers; Unavailable if none does."""
        return self.post_timed(path, body)[0]

    def post_timed(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """`post`, and when (time.monotonic()) the attempt that was answered was sent: a
        lease renewed by it lives at least TTL from then (coord/remote.py's renew deadline)."""
        if self._pid != os.getpid():  # a forked child: never share the parent's connections
            self.__init__(self.cfg)  # type: ignore[misc]
        n = len(self._clients)
        why = "no endpoint"
        for step in range(n):
            i = (self._at + step) % n
            client = self._clients[i]
            sent = time.monotonic()
            try:
                self._authenticate(client)
                found: dict[str, Any] = client.post(client.get_url(path), json=body)
            except (etcd_errors.ConnectionFailedError, etcd_errors.ConnectionTimeoutError) as exc:
                why = f"{self.cfg.endpoints[i]}: {_short(exc)}"
                continue
            except etcd_errors.Etcd3Exception as exc:
                text = _short(exc)
                if "lease not found" in text:
                    raise LeaseGone(text) from exc
                if "invalid auth token" in text:
                    client.session.headers.pop("Authorization", None)
                why = f"{self.cfg.endpoints[i]}: {text}"  # no leader, timed out …: try another
                continue
            self._at = i
            return found, sent
        raise Unavailable(
            f"etcd cannot be reached or has no quorum ({why})",
            "nothing was decided; this runs again once etcd answers (looop never falls back to"
            " files)",
        )

    def _authenticate(self, client: etcd3gw.Etcd3Client) -> None:
        if not self.cfg.username or "Authorization" in client.session.headers:
            return
        password = os.environ.get(self.cfg.password_env)
        if password is None:
            raise UsageError(
                f"coordination.password_env: ${self.cfg.password_env} is not set",
                "export the etcd password in that variable",
            )
        found = client.post(
            client.get_url("/auth/authenticate"),
            json={"name": self.cfg.username, "password": password},
        )
        client.session.headers["Authorization"] = str(found["token"])

    def endpoints(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        """Each endpoint asked on its own (`looop doctor`): (url, why it did not answer or
        None, its /maintenance/status: leader, revision, dbSize …)."""
        found: list[tuple[str, str | None, dict[str, Any]]] = []
        for url, client in zip(self.cfg.endpoints, self._clients, strict=True):
            try:
                self._authenticate(client)
                status = client.post(client.get_url("/maintenance/status"), json={})
            except (etcd_errors.Etcd3Exception, OSError) as exc:
                found.append((url, _short(exc), {}))
                continue
            found.append((url, None, status if isinstance(status, dict) else {}))
        return found

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
        with contextlib.suppress(LeaseGone):
            self.post("/kv/lease/revoke", {"ID": lease})


def _short(exc: BaseException) -> str:
    text = getattr(exc, "detail_text", None) or str(exc) or type(exc).__name__
    return str(text).replace("\n", " ")[:200]


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
