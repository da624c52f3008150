"""Loops apart on one etcd: no loop's prefix may lie inside another's (or contain it).

With prefixes `/p` and `/p/claims`, `/p`'s `looop asks` and `looop claims` would list the
other loop's records. So each loop records its prefix once under `looop-prefixes/`
(outside every prefix: prefixes start with "/"), and a process that registers its host
(coord/remote.py `register`: a pulse taken, a claim) reads them all in the same round
trip; a prefix nested with another loop's is refused, naming both. A loop's record is
kept (no lease): an idle loop's keys are still there to be mixed up.
"""

from __future__ import annotations

import base64
import time
from typing import Any

from looop_py import jsonio
from looop_py.coord.etcd import Client, cmp, delete, put, unb64, value_of
from looop_py.errors import ConfigError

REGISTRY = "looop-prefixes"


def nested(a: str, b: str) -> bool:
    """Whether prefix `a` lies inside `b`, or `b` inside `a` (and they differ). Pure."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a != b and (a.startswith(b) or b.startswith(a))


class PrefixNested(ConfigError):
    """This loop's prefix is nested with another loop's on the same etcd."""


def check_in(client: Client, prefix: str, host: str, root: str) -> None:
    """Record `prefix` (once) and refuse it when another loop's is nested with it: one
    transaction. PrefixNested names both; a record this call made is taken back."""
    prefix = prefix.rstrip("/")
    mine = f"{REGISTRY}/{prefix}"
    body = jsonio.canonical({"prefix": prefix, "host": host, "root": root, "at": time.time()})
    everyone = _range(f"{REGISTRY}/")
    made, responses = client.txn(
        [cmp(mine, "CREATE", "EQUAL", 0)], [put(mine, body), everyone], [everyone]
    )
    kvs = responses[-1].get("response_range", {}).get("kvs", []) if responses else []
    for kv in kvs:
        other = _record(kv)
        theirs = str(other.get("prefix") or unb64(kv["key"]).decode()[len(REGISTRY) + 1 :])
        if not nested(prefix, theirs):
            continue
        if made:  # ours is the newcomer: leave no record behind to refuse the other by
            client.txn([], [delete(mine)])
        raise PrefixNested(
            f"coordination.prefix: {prefix!r} is nested with the prefix {theirs!r} of another"
            f" loop on this etcd (host {other.get('host', '?')}, work dir"
            f" {other.get('root', '?')}); one loop would read the other's claims and records",
            "give each loop a prefix of its own that neither contains nor lies inside another,"
            ' e.g. "/looop/team-a" and "/looop/team-b"',
        )


def _record(kv: dict[str, Any]) -> dict[str, Any]:
    try:
        found = jsonio.loads(value_of(kv))
    except jsonio.JSONDecodeError:
        return {}
    return found if isinstance(found, dict) else {}


def _range(start: str) -> dict[str, Any]:
    """A transaction's read of every key under `start`."""
    key = start.encode()
    end = key[:-1] + bytes([key[-1] + 1])
    return {
        "request_range": {
            "key": base64.b64encode(key).decode(),
            "range_end": base64.b64encode(end).decode(),
        }
    }
