"""The shelf on etcd: every host's shared records as keys `P/data/<kind>/<name>`.

workdir/shelf.py says what a shelf promises; this keeps it with etcd
transactions. `create` compares the key's create_revision with 0, `move` puts the
new key and deletes the old in one transaction guarded by the old one's
mod_revision, so nothing is archived twice or lost between the two. Inside
`fenced(claim, token)` every transaction also compares the claim key's create
revision (its epoch) with the token; when that is what failed,
FenceLost is raised and nothing was written. `confirm` asks the same in one round trip
before a side effect (a command, a worker, a notification) leaves looop's hands.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from looop_py.coord.etcd import cmp, cmp_value, delete, put, rng, unb64, value_of
from looop_py.coord.etcdwatch import RecordWatch
from looop_py.coord.remote import EtcdCoordinator
from looop_py.errors import Busy, FenceLost
from looop_py.ids import check_segment
from looop_py.workdir.shelf import Fencing, check_kind

MAX_TRIES = 50  # a move that lost to a concurrent change this often: Busy


def _first(response: dict[str, Any]) -> dict[str, Any] | None:
    return next(iter(response.get("response_range", {}).get("kvs", [])), None)


class EtcdShelf:
    backend = "etcd"
    shared = True

    def __init__(self, coord: EtcdCoordinator) -> None:
        self.coord = coord
        self.client = coord.client
        self.host = coord.host

    def _key(self, kind: str, name: str = "") -> str:
        tail = check_segment(name, "record name") if name else ""
        return self.coord.key("data", check_kind(kind), tail)

    def where(self, kind: str, name: str) -> str:
        return f"etcd {self._key(kind, name)}"

    # -- reads -------------------------------------------------------------------------

    def get(self, kind: str, name: str) -> bytes | None:
        found = self.client.get(self._key(kind, name))
        return value_of(found[0]) if found else None

    def names(self, kind: str) -> list[str]:
        start = self._key(kind)
        kvs = self.client.get(start, prefix=True, keys_only=True)
        return sorted(unb64(kv["key"]).decode().removeprefix(start) for kv in kvs)

    def items(self, kind: str) -> list[tuple[str, bytes | None]]:
        start = self._key(kind)
        kvs = self.client.get(start, prefix=True)
        found = [(unb64(kv["key"]).decode().removeprefix(start), value_of(kv)) for kv in kvs]
        return sorted(found, key=lambda item: item[0])

    def empty(self, kind: str) -> bool:
        return not self.client.get(self._key(kind), prefix=True, limit=1, keys_only=True)

    # -- writes ------------------------------------------------------------------------

    def _txn(self, compare: list[dict[str, Any]], success: list[dict[str, Any]]) -> bool:
        """One transaction, fenced when a fence is set; FenceLost if the fence failed it."""
        fence = self.coord.fence  # kept by the coordinator: one per process and config
        if fence is None:
            ok, _ = self.client.txn(compare, success)
            return ok
        name, token = fence
        claim_key = self.coord.key("claims", name)
        guard = self.coord.fence_guard(name, token)
        ok, responses = self.client.txn([*guard, *compare], success, [rng(claim_key)])
        if ok:
            return True
        claim = _first(responses[0]) if responses else None
        if claim is None or int(claim.get("create_revision", 0)) != token:
            raise FenceLost(
                f"lost the {name} at token {token} before writing {success_keys(success)}",
                "a newer pulse holds it; nothing more of this beat is written",
                token=token,
            )
        return False

    def put(self, kind: str, name: str, data: bytes) -> None:
        self._txn([], [put(self._key(kind, name), data)])

    def create(self, kind: str, name: str, data: bytes) -> bool:
        key = self._key(kind, name)
        return self._txn([cmp(key, "CREATE", "EQUAL", 0)], [put(key, data)])

    def delete(self, kind: str, name: str) -> bool:
        key = self._key(kind, name)
        return self._txn([cmp(key, "CREATE", "GREATER", 0)], [delete(key)])

    def move(self, kind: str, name: str, to: str) -> bool:
        src, dst = self._key(kind, name), self._key(to, name)
        for _ in range(MAX_TRIES):
            found = self.client.get(src)
            if not found:
                return False
            rev = int(found[0].get("mod_revision", 0))
            if self._txn(
                [cmp(src, "MOD", "EQUAL", rev)], [put(dst, value_of(found[0])), delete(src)]
            ):
                return True
        raise Busy(f"{src} changed under this move {MAX_TRIES} times in a row")

    def swap(self, kind: str, name: str, old: bytes | None, new: bytes) -> bool:
        key = self._key(kind, name)
        same = cmp(key, "CREATE", "EQUAL", 0) if old is None else cmp_value(key, old)
        return self._txn([same], [put(key, new)])

    @contextlib.contextmanager
    def fenced(self, claim: str, token: int) -> Iterator[None]:
        """Every write in the block is conditional on `token` being `claim`'s current epoch."""
        before, self.coord.fence = self.coord.fence, (check_segment(claim, "claim name"), token)
        try:
            yield
        finally:
            self.coord.fence = before

    def confirm(self, what: str) -> Fencing | None:
        """Inside `fenced`: one round trip proving the fence still holds before `what` (a side
        effect) starts, and its renew deadline not passed (FenceLost otherwise, so it is not
        started). None outside a fence: nothing is being fenced."""
        fence = self.coord.fence
        if fence is None:
            return None
        name, token = fence
        return Fencing(name, token, self.coord.confirm(name, token))

    def watch(
        self, kinds: tuple[str, ...], on_change: Callable[[], None]
    ) -> Callable[[], None] | None:
        """Call `on_change` (from a thread) whenever a record of these kinds is written or
        removed by any host (coord/etcdwatch.py); the function that stops it. Returns once
        the watch is open (or its first try failed): a change after that is not missed."""
        prefixes = [self._key(kind) for kind in kinds]  # P/data/KIND/
        watching = RecordWatch(self.client, prefixes, on_change).start()
        watching.ready.wait(self.client.cfg.timeout_s * len(self.client.cfg.endpoints))
        return watching.close

    def close(self) -> None:
        """Revoke this process's lease and stop its keeper thread (the coordinator's)."""
        self.coord.close()


def success_keys(success: list[dict[str, Any]]) -> str:
    """The keys a transaction would have written, for the message."""
    keys = []
    for op in success:
        body = op.get("request_put") or op.get("request_delete_range") or {}
        if "key" in body:
            keys.append(unb64(body["key"]).decode())
    return ", ".join(keys) or "nothing"
