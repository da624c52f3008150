"""The seal on etcd: the loop's shared keys proven unchanged in one transaction.

On files the seal's survey (sensing/survey.py) proves that no record changed;
on etcd the records are keys under the prefix P, and this module is the
survey's counterpart. A fingerprint of P is (a revision R, the number of keys
in each range below); the shared keys are as they were at R exactly when no
key in the ranges has a mod revision above R (a put or a new key would) and
each range holds as many keys as it did (a delete would change the count).
Both are asked in one transaction: a compare per range, `MOD < R + 1` (etcd
compares every key in a compare's range), and a count per range, so the quiet
beat on etcd costs one request (beat/quiet.py).

Left out of the ranges: the pulse claim (taken and let go by every host's full
beat, never part of the world: sensing/probes.py leaves it out), the host
registrations and the lease records (they come and go with processes; a claim
riding on a lease is in the ranges and goes with it).

A full beat takes a fingerprint right after it takes the pulse, before it reads
anything shared (`mark`), and seals only when a second fingerprint at the end
has the same revision and counts (`settled`): nothing anywhere in the cluster
was written while the beat read, so what it read is the state at R, and the
quiet beat compares the state now with that one. At import it loads only the
client (coord/etcd.py) and what the quiet beat on etcd needs.
"""

from __future__ import annotations

from looop_py.coord.etcd import Client, _b64, dumps, loads

# typing is not imported at run time: the quiet beat on etcd loads this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.coord.etcd import Settings

PULSE = "pulse"  # coord/base.PULSE: the claim each full beat on a shared backend takes
_SETTINGS = (
    "endpoints",
    "timeout_s",
    "ca_cert",
    "cert_cert",
    "cert_key",
    "username",
    "password_env",
)


def ranges(prefix: str) -> list[tuple[bytes, bytes]]:
    """The [start, end) ranges of the loop's shared keys under `prefix` (as
    coord/remote.py's keys: `prefix` without its trailing slash, then `/…`)."""
    p = prefix.rstrip("/").encode()
    return [
        (p + b"/", p + b"/claims/" + PULSE.encode()),
        (p + b"/claims/" + PULSE.encode() + b"\0", p + b"/hosts/"),
        (p + b"/hosts0", p + b"/leases/"),  # "0" follows "/": past every P/hosts/… key
        (p + b"/leases0", p + b"0"),
    ]


class Fingerprint:
    """The shared keys' revision and count per range, and the settings to ask again."""

    __slots__ = ("counts", "prefix", "revision", "settings")

    def __init__(
        self, settings: dict[str, Any], prefix: str, revision: int, counts: list[int]
    ) -> None:
        self.settings = settings
        self.prefix = prefix
        self.revision = revision
        self.counts = counts

    def line(self) -> str:
        """The seal's `shared` line (one line of JSON)."""
        body = {"prefix": self.prefix, "revision": self.revision, "counts": self.counts}
        return dumps({**body, "etcd": self.settings})

    @classmethod
    def from_line(cls, text: str) -> Fingerprint:
        """ValueError (or KeyError, TypeError) for a line that is not one."""
        found = loads(text)
        settings = found["etcd"]
        if set(settings) != set(_SETTINGS) or not isinstance(settings["endpoints"], list):
            raise ValueError("not the etcd settings of a seal")
        counts = [int(c) for c in found["counts"]]
        return cls(settings, str(found["prefix"]), int(found["revision"]), counts)


class _Settings:
    """A Client's settings from a seal's line (the config itself is not loaded)."""

    def __init__(self, found: dict[str, Any]) -> None:
        self.endpoints = tuple(str(e) for e in found["endpoints"])
        self.timeout_s = float(found["timeout_s"])
        self.ca_cert = str(found["ca_cert"])
        self.cert_cert = str(found["cert_cert"])
        self.cert_key = str(found["cert_key"])
        self.username = str(found["username"])
        self.password_env = str(found["password_env"])


def settings_of(cfg: Settings) -> dict[str, Any]:
    found = {name: getattr(cfg, name) for name in _SETTINGS}
    found["endpoints"] = list(found["endpoints"])
    return found


def _counts(responses: list[dict[str, Any]]) -> list[int]:
    return [int(r.get("response_range", {}).get("count", 0)) for r in responses]


def _count_ops(prefix: str) -> list[dict[str, Any]]:
    return [
        {"request_range": {"key": _b64(start), "range_end": _b64(end), "count_only": True}}
        for start, end in ranges(prefix)
    ]


def mark(client: Client, cfg: Settings, prefix: str) -> Fingerprint:
    """The shared keys now: one transaction (Unavailable when etcd does not answer)."""
    found = client.post("/kv/txn", {"success": _count_ops(prefix)})
    revision = int(found.get("header", {}).get("revision", 0))
    return Fingerprint(settings_of(cfg), prefix, revision, _counts(found.get("responses", [])))


def settled(client: Client, before: Fingerprint) -> Fingerprint | None:
    """`before`, if nothing in the cluster was written since it was taken; else None."""
    now = mark(client, _Settings(before.settings), before.prefix)
    if now.revision != before.revision or now.counts != before.counts:
        return None
    return before


def holds(sealed: Fingerprint, client: Client | None = None) -> bool:
    """Whether the shared keys are still as they were at the sealed revision: one
    transaction. Unavailable (or UsageError: no password) when it cannot be asked."""
    client = client or Client(_Settings(sealed.settings))
    above = str(sealed.revision + 1)
    compare = [
        {
            "key": _b64(start),
            "range_end": _b64(end),
            "target": "MOD",
            "result": "LESS",
            "mod_revision": above,
        }
        for start, end in ranges(sealed.prefix)
    ]
    found = client.post("/kv/txn", {"compare": compare, "success": _count_ops(sealed.prefix)})
    if not found.get("succeeded"):
        return False  # a key was put or created since
    return _counts(found.get("responses", [])) == sealed.counts
