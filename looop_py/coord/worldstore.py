"""The committed world on etcd, one key per item, so a commit writes only what changed.

    P/data/world/meta          the record without its items: hash, committed_at, action,
                               next_wake, host, epoch, and how many items there are
    P/data/world/items/<name>  one item's value (its name %-quoted into one key segment)

The whole world was one value before (rewritten on every committing beat: 63.5 KB at
1,000 goals, etcd's request limit near 24,000). Now a commit puts the items whose value
changed, deletes the ones that went, and puts the meta — in transactions of at most
MAX_OPS operations (etcd's default --max-txn-ops is 128), the meta last, each guarded by
the pulse token, so a holder that lost the pulse stops writing at once. A reader reads the
world in one range (one revision). A commit cut short leaves items newer than the meta:
the next holder reads what is stored, sees a hash that does not match the meta's, decides
and writes its diff against what is really there, so the store heals itself. The world
committed by an older looop as the single key `world/committed` is read once and
replaced by the first commit.

The goal ceiling (README): 10,000 goals, tested at that size (tests/coord/test_worldstore.py).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote

from looop_py import jsonio
from looop_py.coord.etcd import Client, delete, put, unb64, value_of

MAX_OPS = 100  # per transaction: under etcd's default --max-txn-ops (128), with the guard
GOAL_CEILING = 10_000  # goals (hence world items) the shared world is tested at
LEGACY = "committed"  # world/committed: the whole record as one value (before per item)


class WorldStore:
    """The committed world under `base` (P/data/world/): read whole, written as a diff."""

    def __init__(self, client: Client, base: str) -> None:
        self.client = client
        self.base = base.rstrip("/") + "/"
        self.stored: dict[str, bytes] = {}  # item -> value, as last read or written
        self.legacy = False  # the old single key is there (deleted by the next commit)

    def _item_key(self, name: str) -> str:
        return f"{self.base}items/{quote(name, safe='')}"

    def read(self) -> bytes | None:
        """The committed record (as the single key held it: JSON with its items), or None
        when nothing was committed on this prefix yet. One range, one revision."""
        meta: Any = None
        legacy: bytes | None = None
        items: dict[str, bytes] = {}
        start = f"{self.base}items/"
        for kv in self.client.get(self.base, prefix=True):
            key = unb64(kv["key"]).decode()
            if key.startswith(start):
                items[unquote(key[len(start) :])] = value_of(kv)
            elif key == f"{self.base}meta":
                meta = _loads(value_of(kv))
            elif key == f"{self.base}{LEGACY}":
                legacy = value_of(kv)
        self.stored, self.legacy = items, legacy is not None
        if isinstance(meta, dict):
            meta.pop("count", None)
            record = {**meta, "items": {k: v.decode("utf-8", "replace") for k, v in items.items()}}
            return jsonio.dumps(record, pretty=True) + b"\n"
        return legacy  # nothing per item yet: the old whole record, if any

    def commit(self, record: dict[str, Any], guard: list[dict[str, Any]]) -> bool:
        """Write `record` (with its items) as a diff against what is stored; every
        transaction under `guard` (the pulse token). False when the guard failed: what was
        not written yet is not written."""
        items: dict[str, str] = dict(record.get("items") or {})
        meta = {k: v for k, v in record.items() if k != "items"}
        meta["count"] = len(items)
        ops: list[dict[str, Any]] = []
        for name, value in items.items():
            data = value.encode()
            if self.stored.get(name) != data:
                ops.append(put(self._item_key(name), data))
        ops += [delete(self._item_key(name)) for name in self.stored if name not in items]
        if self.legacy:
            ops.append(delete(f"{self.base}{LEGACY}"))
        ops.append(put(f"{self.base}meta", jsonio.canonical(meta)))  # last: the hash with it
        for at in range(0, len(ops), MAX_OPS):
            ok, _ = self.client.txn(guard, ops[at : at + MAX_OPS])
            if not ok:
                return False
        self.stored = {name: value.encode() for name, value in items.items()}
        self.legacy = False
        return True


def _loads(data: bytes) -> Any:
    try:
        return jsonio.loads_bounded(data)
    except ValueError:
        return None
