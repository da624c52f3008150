"""The sticky pulse on etcd: one host holds `P/claims/pulse` across beats, election style.

The pulse key rides on a lease of its own, not on a process's: the host that takes
it keeps it beat after beat. Its next beat — any process of that host and work dir:
`looop pulse` from cron, `looop up` — finds the key naming this host, this machine and
this work dir, and renews that same lease (one keepalive) instead of releasing and
campaigning again, so the token (the key's create revision) stays the same. `looop
up` keeps the lease alive between its beats; a host that stops beating (it died, is
paused, is cut off) loses the pulse when the lease expires, after `lease_ttl_s`, and
the next beat of another host takes it: failover within the TTL plus one beat. `looop
down` resigns at once (the key deleted, the lease revoked).

Every other host's pulse is one read: the key names another holder, so the beat steps
aside (PulseHeld, "held by host H since T"), taking no lease and writing nothing.

The fence is unchanged: a side effect still confirms that the key has this token
(coord/remote.py `confirm`) and that this process renewed the lease recently enough
(the renew deadline counts from the last renewal this process sent), so a paused
holder whose lease expired meanwhile does not act.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from looop_py import identity, jsonio
from looop_py.coord.base import PULSE
from looop_py.coord.etcd import Client, cmp, delete, put, value_of
from looop_py.errors import ClaimHeld, UsageError
from looop_py.logfile import iso


class PulseHeld(ClaimHeld):
    """Another host (or another work dir of this one) holds the pulse: step aside."""

    def __init__(self, message: str, hint: str | None, *, holder: dict[str, Any]) -> None:
        super().__init__(message, hint)
        self.holder = holder  # {host, since, token}: `looop pulse --json` and status say it


class HostIdTaken(UsageError):
    """Another machine is live under this host id: refused, not shared."""


def hostname() -> str:
    import socket  # only when a host registers

    return socket.gethostname()


def who(reg: dict[str, Any]) -> str:
    """A host registration as an error names it."""
    return (
        f"hostname {reg.get('hostname', '?')}, pid {reg.get('pid', '?')},"
        f" machine {str(reg.get('machine', '?'))[:45]}"
    )


@dataclass(frozen=True, slots=True)
class Held:
    """The pulse as this process holds it: its lease, its token, since when."""

    lease: int
    token: int
    since: float  # unix time the host took it (the key's acquired_at)


def holder_of(kv: dict[str, Any]) -> dict[str, Any]:
    """Who holds the pulse, from its key: {host, since, token, …} as status shows it."""
    try:
        body = jsonio.loads(value_of(kv))
    except jsonio.JSONDecodeError:
        body = None
    body = body if isinstance(body, dict) else {}
    since = jsonio.number(body.get("acquired_at"))
    return {
        "host": body.get("host") if isinstance(body.get("host"), str) else None,
        "since": iso(since) if since is not None else None,
        "token": int(kv.get("create_revision", 0)),
        "machine": body.get("machine"),
        "root": body.get("root"),
        "lease": int(kv.get("lease", 0)),
    }


def held_message(holder: dict[str, Any]) -> str:
    """`held by host b since 2026-…Z (token 123)`."""
    since = f" since {holder['since']}" if holder.get("since") else ""
    return f"held by host {holder.get('host') or '?'}{since} (token {holder.get('token')})"


class Election:
    """This process's view of the sticky pulse: campaign (adopt or take), renew, resign."""

    def __init__(
        self,
        client: Client,
        key: str,
        *,
        host: str,
        root: str,
        ttl: int,
        register: Callable[[], None],
    ) -> None:
        self.client = client
        self.pkey = key  # P/claims/pulse
        self.host = host
        self.root = root
        self.ttl = ttl
        self._register = register  # the host-id check, before a new lease is campaigned for
        self._lock = threading.Lock()
        self._held: Held | None = None
        self._renewed = 0.0  # time.monotonic() when the answered renewal was sent
        self.beating = False  # inside a beat: keep the lease alive while it runs
        self.between_beats = False  # `looop up`: keep it alive between beats too

    @property
    def held(self) -> Held | None:
        with self._lock:
            return self._held

    def renewed_at(self, lease: int) -> float | None:
        """When this process last renewed `lease` (monotonic), if it is the pulse's lease."""
        with self._lock:
            held = self._held
            return self._renewed if held is not None and held.lease == lease else None

    def _hold(self, held: Held | None, sent: float = 0.0) -> None:
        with self._lock:
            self._held, self._renewed = held, sent

    def campaign(self) -> int:
        """The pulse token for this beat: the lease this host holds renewed (adopted), or the
        pulse taken afresh when free. PulseHeld (one read, nothing written) when another holds
        it; HostIdTaken when it names this host id from another machine."""
        me = identity.machine()
        kv = next(iter(self.client.get(self.pkey)), None)
        if kv is not None:
            holder = holder_of(kv)
            ours = holder["host"] == self.host and holder["root"] == self.root
            if holder["host"] == self.host and holder["machine"] not in (me, None):
                raise HostIdTaken(
                    f"the pulse is {held_message(holder)} on another machine"
                    f" ({str(holder['machine'])[:45]}); this one is {me[:45]}",
                    "give each machine its own id: $LOOOP_HOST_ID or state/host-id",
                )
            if not ours or holder["machine"] != me or not holder["lease"]:
                self._hold(None)
                raise self._held_error(holder)
            ttl, sent = self.client.refresh(holder["lease"])
            if ttl > 0:  # still ours: the same lease, the same token
                since = jsonio.number(jsonio.loads(value_of(kv)).get("acquired_at")) or 0.0
                self._hold(Held(holder["lease"], holder["token"], since), sent)
                return int(holder["token"])
            # Its lease expired between beats (and the key with it): campaign afresh.
        return self._take(me)

    def _take(self, me: str) -> int:
        self._register()
        lease, sent = self.client.grant(self.ttl)
        now = time.time()
        body = {
            "name": PULSE,
            "session": f"pulse.{self.host}",
            "pid": os.getpid(),
            "create_time": None,
            "acquired_at": now,
            "expires_at": None,
            "ttl_s": None,
            "host": self.host,
            "machine": me,
            "root": self.root,
            "lease": lease,
        }
        reg = {"machine": me, "pid": os.getpid(), "hostname": hostname()}
        hosts_key = self.pkey.rsplit("/claims/", 1)[0] + f"/hosts/{self.host}/{lease:x}"
        ok, token = self.client.txn_revision(
            [cmp(self.pkey, "CREATE", "EQUAL", 0)],
            [
                put(self.pkey, jsonio.canonical(body), lease),
                put(hosts_key, jsonio.canonical(reg), lease),  # the id stays registered
            ],
        )
        if ok:
            self._hold(Held(lease, token, now), sent)
            return token
        self.client.revoke(lease)  # another host campaigned first
        self._hold(None)
        kv = next(iter(self.client.get(self.pkey)), None)
        holder = holder_of(kv) if kv else {"host": None, "since": None, "token": 0}
        raise self._held_error(holder)

    def _held_error(self, holder: dict[str, Any]) -> PulseHeld:
        public = {k: holder.get(k) for k in ("host", "since", "token")}
        return PulseHeld(
            f"the pulse is {held_message(holder)}",
            "that host beats for the loop; this one takes over if it stops (after the lease TTL)"
            " or runs `looop down`",
            holder=public,
        )

    def renew(self) -> None:
        """From the keep-alive thread: renew the pulse lease while a beat runs (or, under
        `looop up`, between beats too); forget it once etcd says it is gone."""
        held = self.held
        if held is None or not (self.beating or self.between_beats):
            return
        ttl, sent = self.client.refresh(held.lease)
        with self._lock:
            if self._held is not held:
                return
            if ttl > 0:
                self._renewed = max(self._renewed, sent)
            else:
                self._held = None

    def resign(self) -> dict[str, Any] | None:
        """Hand the pulse over now, if this host and work dir hold it: the key deleted (only
        while it still has the token read) and its lease revoked. Who held it, or None."""
        kv = next(iter(self.client.get(self.pkey)), None)
        if kv is None:
            self._hold(None)
            return None
        holder = holder_of(kv)
        if holder["host"] != self.host or holder["root"] != self.root:
            return None
        if holder["machine"] != identity.machine():
            return None
        self.client.txn([cmp(self.pkey, "CREATE", "EQUAL", holder["token"])], [delete(self.pkey)])
        if holder["lease"]:
            self.client.revoke(holder["lease"])
        self._hold(None)
        return {k: holder.get(k) for k in ("host", "since", "token")}
