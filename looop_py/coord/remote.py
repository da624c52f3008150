"""The `etcd` backend: claims, fencing and the pulse as keys under a prefix (coord/etcd.py).

A claim is created only if absent (an expired one is deleted first); its epoch,
the fencing token, is the key's create revision — etcd's, so it grows with every
new holder, survives a prefix wipe or a restore, and leaves no counter key behind
— and the claim rides on its holder's lease. This very
process keeps its own lease alive from a thread; any other holder process (the
script that ran `looop claim`, a worker) gets a keeper process (coord/keeper.py)
that refreshes its lease while it lives and revokes it the moment it dies. A
host that dies takes its keepers along, and its leases expire after the TTL.
A fenced write is one transaction: the claim key still has that create revision.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from looop_py import identity, jsonio
from looop_py.coord import lease as lease_mod
from looop_py.coord import leasekeep, prefixes
from looop_py.coord.base import PULSE, check_key
from looop_py.coord.election import Election, HostIdTaken, hostname, who
from looop_py.coord.etcd import Client, LeaseGone, cmp, delete, put, rng, unb64, value_of
from looop_py.coord.holders import ROUND_PREFIX
from looop_py.coord.lease import Claim, Outcome
from looop_py.coord.reaper import ClaimView
from looop_py.coord.worldstore import WorldStore
from looop_py.errors import Busy, FenceLost, Unavailable
from looop_py.ids import check_segment
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.coord.holders import Holder
    from looop_py.workdir.config import CoordinationConfig

MAX_TRIES = 50  # a claim's transaction lost to a concurrent change this often: Busy
# The renew deadline: a lease renewed at R (when the request was sent) lives at least until
# R + TTL on etcd's clock; a side effect starts only before R + TTL - margin on ours, the
# margin covering clock drift between the two (a fraction of the TTL, at least DRIFT_MIN_S).
DRIFT_SHARE = 0.25
DRIFT_MIN_S = 0.5


def renew_deadline(renewed: float, ttl: float) -> float:
    """When a holder whose lease was last renewed at `renewed` must stop starting acts. Pure."""
    return renewed + ttl - max(DRIFT_MIN_S, ttl * DRIFT_SHARE)


def _kvs(response: dict[str, Any]) -> list[dict[str, Any]]:
    return list(response.get("response_range", {}).get("kvs", []))


def _rev(kv: dict[str, Any] | None, field: str = "mod_revision") -> int:
    return int(kv.get(field, 0)) if kv else 0


class EtcdCoordinator:
    backend = "etcd"

    def __init__(self, paths: Paths, cfg: CoordinationConfig, host: str) -> None:
        self.paths = paths
        self.cfg = cfg
        self.host = host
        self.client = Client(cfg)
        self.prefix = cfg.prefix.rstrip("/")
        self.ttl = max(2, math.ceil(cfg.lease_ttl_s))
        self._own: int = 0  # this process's lease (0: none yet, or it was lost)
        self._renewed = 0.0  # time.monotonic() when its last grant or renewal was sent
        self._registered = 0  # the lease this host id was registered under (register)
        self._prefix_checked = False  # this loop's prefix recorded, and nested with none
        self.fence: tuple[str, int] | None = None  # (claim, token) shelf writes are fenced by
        self._own_pid = os.getpid()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.world = WorldStore(self.client, self.key("data", "world"))
        self.election = Election(
            self.client,
            self.key("claims", PULSE),
            host=host,
            root=str(paths.root),
            ttl=self.ttl,
            register=self.register,
        )

    def key(self, *parts: str) -> str:
        return "/".join((self.prefix, *parts))

    # -- claims ------------------------------------------------------------------------

    def _parse(self, name: str, kv: dict[str, Any] | None) -> Claim | None:
        """The claim a key holds; its epoch is the key's create revision (etcd's own)."""
        if kv is None:
            return None
        try:
            found = Claim.from_json(name, jsonio.loads(value_of(kv)))
        except jsonio.JSONDecodeError:
            return None
        return replace(found, epoch=_rev(kv, "create_revision")) if found else None

    def _live(self, cur: Claim, now: float) -> bool:
        """Its key exists, so its lease does: live until its --ttl passes. A holder that died
        loses its claim when its lease goes (its keeper revokes it within a moment; a host
        that died, after the TTL), never by a pid check here: a claim naming this host may come
        from another machine under the same id, or a container whose pids are not ours."""
        return not cur.expired(now)

    def _held_by(self, cur: Claim, holder: Holder) -> bool:
        same_host = holder.pid is None or cur.host == self.host  # a round has no host
        return same_host and cur.held_by(holder)

    def claim(
        self,
        name: str,
        holder: Holder,
        *,
        ttl_s: float | None = None,
        renew: bool = False,
        now: float,
        linger_s: float = 0.0,
    ) -> Outcome:
        """`linger_s`: the claim outlives its holder process by this long (while its host
        lives), on a lease of its own: a round's worker, whose result only its host can read."""
        check_segment(name, "claim name")
        lease_mod.check_ttl(ttl_s)
        self.register()
        ckey = self.key("claims", name)
        for _ in range(MAX_TRIES):
            kc = next(iter(self.client.get(ckey)), None)
            cur = self._parse(name, kc)
            if cur is not None and self._live(cur, now):
                if not self._held_by(cur, holder):
                    raise lease_mod.held_error(name, cur)
                if not renew:
                    return Outcome(cur, "held")
                renewed = cur.renewed(now, ttl_s)
                lease = int(kc.get("lease", 0)) if kc else 0
                if self._txn_lease(
                    [cmp(ckey, "MOD", "EQUAL", _rev(kc))], [put(ckey, *self._body(renewed, lease))]
                ):
                    return Outcome(renewed, "renewed")
                continue
            if renew:
                raise lease_mod.lapsed_error(name, cur, now)
            # Free, or expired: a new holder. The key is deleted and created afresh, so its
            # create revision — the epoch — is etcd's newest revision, above every earlier one.
            if kc is not None:  # an expired claim goes first (one transaction may not
                # both delete and put a key); a claimant between the two makes ours fail
                self.client.txn([cmp(ckey, "MOD", "EQUAL", _rev(kc))], [delete(ckey)])
            new = Claim.taken(name, holder, 0, now=now, ttl_s=ttl_s, host=self.host)
            lease = self._lease_for(holder, linger_s)
            body = self._body(new, lease)
            revision = self._txn_lease([cmp(ckey, "CREATE", "EQUAL", 0)], [put(ckey, *body)])
            if revision:
                return Outcome(replace(new, epoch=revision), "acquired")
        raise Busy(f"claim {name} changed under this one {MAX_TRIES} times in a row")

    def _body(self, claim: Claim, lease: int) -> tuple[bytes, int]:
        body = claim.to_json()
        body.pop("epoch", None)  # the key's create revision is the epoch
        return jsonio.canonical({**body, "lease": lease}), lease

    def _txn_lease(self, compare: list[dict[str, Any]], success: list[dict[str, Any]]) -> int:
        """The transaction's revision when it succeeded, else 0."""
        try:
            ok, revision = self.client.txn_revision(compare, success)
        except LeaseGone:
            with self._lock:
                self._own = 0  # expired while we were away: the next try grants another
            return 0
        return revision if ok else 0

    def unclaim(self, name: str, holder: Holder, *, now: float) -> Claim | None:
        ckey = self.key("claims", check_segment(name, "claim name"))
        for _ in range(MAX_TRIES):
            found = self.client.get(ckey)
            if not found:
                return None
            cur = self._parse(name, found[0])
            if cur is not None and not self._held_by(cur, holder) and self._live(cur, now):
                raise lease_mod.not_yours_error(name, cur)
            ok, _ = self.client.txn([cmp(ckey, "MOD", "EQUAL", _rev(found[0]))], [delete(ckey)])
            if ok:
                return cur
        raise Busy(f"claim {name} changed under this release {MAX_TRIES} times in a row")

    def get(self, name: str, now: float) -> ClaimView | None:
        found = self.client.get(self.key("claims", check_segment(name, "claim name")))
        if not found:
            return None
        cur = self._parse(name, found[0])
        return ClaimView(name, cur, self._live(cur, now) if cur else True)

    def list_claims(self, now: float) -> list[ClaimView]:
        views = []
        start = self.key("claims", "")
        for kv in self.client.get(start, prefix=True):
            name = unb64(kv["key"]).decode().removeprefix(start)
            cur = self._parse(name, kv)
            views.append(ClaimView(name, cur, self._live(cur, now) if cur else True))
        return sorted(views, key=lambda v: v.name)

    def reap(self, now: float, round_live: Callable[[str], bool]) -> list[dict[str, Any]]:
        """Remove expired claims, ended rounds' claims and this host's dead processes' claims."""
        events: list[dict[str, Any]] = []
        start = self.key("claims", "")
        for kv in self.client.get(start, prefix=True):
            name = unb64(kv["key"]).decode().removeprefix(start)
            cur = self._parse(name, kv)
            if cur is None:
                continue  # not ours to judge: something else wrote it
            reason = None
            if cur.expired(now):
                reason = "expired"
            elif cur.pid is None and (cur.session or "").startswith(ROUND_PREFIX):
                round_id = (cur.session or "").removeprefix(ROUND_PREFIX)
                reason = None if round_live(round_id) else "round-ended"
            elif not self._live(cur, now):
                reason = "holder-dead"
            if reason is None:
                continue
            key = unb64(kv["key"]).decode()
            ok, _ = self.client.txn([cmp(key, "MOD", "EQUAL", _rev(kv))], [delete(key)])
            if ok:
                events.append(
                    {
                        "event": "claim_reaped",
                        "name": name,
                        "reason": reason,
                        "session": cur.session,
                        "pid": cur.pid,
                        "epoch": cur.epoch,
                        "host": cur.host,
                    }
                )
        return events

    # -- fenced writes -----------------------------------------------------------------

    def fence_guard(self, name: str, epoch: int) -> list[dict[str, Any]]:
        """A transaction's compare for "`epoch` is still the current holder's token of
        `name`": its claim key exists and was created at that revision."""
        check_segment(name, "claim name")
        return [cmp(self.key("claims", name), "CREATE", "EQUAL", epoch)]

    def confirm(self, name: str, epoch: int) -> float:
        """Before a side effect, one round trip: `epoch` is still `name`'s live token and, when
        the claim rides on this process's lease, its renew deadline has not passed. Returns
        that deadline (unix seconds; inf for a claim on another process's lease); FenceLost
        when either fails, so the caller does not act."""
        ckey = self.key("claims", check_segment(name, "claim name"))
        ok, responses = self.client.txn(self.fence_guard(name, epoch), [rng(ckey)])
        if not ok:
            raise FenceLost(
                f"lost the {name} at token {epoch} (a newer holder has it, or its lease lapsed)",
                "nothing was done; the holder of the newer token acts instead",
                token=epoch,
            )
        kv = next(iter(_kvs(responses[0])), None) if responses else None
        lease = int(kv.get("lease", 0)) if kv else 0
        with self._lock:
            own, renewed = self._own, self._renewed
        pulse_renewed = self.election.renewed_at(lease) if lease else None
        if pulse_renewed is not None:  # the sticky pulse's lease, renewed by this process
            renewed = pulse_renewed
        elif not lease or lease != own:
            return float("inf")  # another process's lease (a script's keeper): etcd is the judge
        now = time.monotonic()
        deadline = renew_deadline(renewed, self.ttl)
        if now >= deadline:
            raise FenceLost(
                f"lost the {name} at token {epoch}: its lease was last renewed"
                f" {now - renewed:.1f} s ago, past the renew deadline (TTL {self.ttl} s"
                " less the drift margin)",
                "nothing was done; this process was paused or cut off from etcd",
                token=epoch,
            )
        return time.time() + (deadline - now)

    def fenced_put(self, name: str, epoch: int, key: str, value: bytes) -> bool:
        """One transaction: the value is stored only while the fence guard holds."""
        guard = self.fence_guard(name, epoch)
        ok, _ = self.client.txn(guard, [put(self.key("data", check_key(key)), value)])
        return ok

    def read(self, key: str) -> bytes | None:
        found = self.client.get(self.key("data", check_key(key)))
        return value_of(found[0]) if found else None

    def read_world(self) -> bytes | None:
        """The committed world (coord/worldstore.py: one key per item), in one range."""
        return self.world.read()

    def commit_world(self, name: str, epoch: int, record: dict[str, Any]) -> bool:
        """The committed world written as a diff against what is stored, while `epoch` is
        `name`'s token (every transaction guarded)."""
        return self.world.commit(record, self.fence_guard(name, epoch))

    # -- the pulse ---------------------------------------------------------------------

    @contextlib.contextmanager
    def pulse(self) -> Iterator[int | None]:
        """This host's pulse token for one beat (coord/election.py): the pulse it holds,
        renewed, or taken when free; PulseHeld (one read) while another host holds it. Kept
        after the beat: the host's next beat renews the same lease."""
        token = self.election.campaign()
        self._ensure_keeper()  # renews the pulse lease while the beat runs
        self.election.beating = True
        try:
            yield token
        finally:
            self.election.beating = False

    def keep_pulse(self, between_beats: bool) -> None:
        """`looop up`: keep the pulse lease alive between beats too, while this process lives."""
        self.election.between_beats = between_beats
        self._ensure_keeper()

    def resign(self) -> dict[str, Any] | None:
        """`looop down`: hand the pulse over now if this host holds it (who held it)."""
        self.election.between_beats = False
        return self.election.resign()

    # -- this host ---------------------------------------------------------------------

    def register(self) -> None:
        """This host id, under this process's lease, with this machine's identity; refused
        (HostIdTaken, naming both) while another machine holds a live registration of the
        same id. Once per lease: a registration goes with the lease it rides on."""
        lease = self._own_lease()
        if self._registered == lease:
            return
        if not self._prefix_checked:  # no loop's prefix nested with another's (once)
            prefixes.check_in(self.client, self.prefix, self.host, str(self.paths.root))
            self._prefix_checked = True
        me = identity.machine()
        start = self.key("hosts", self.host, "")
        mine = f"{start}{lease:x}"
        body = {"machine": me, "pid": os.getpid(), "hostname": hostname()}
        self.client.txn([], [put(mine, jsonio.canonical(body), lease)])
        for kv in self.client.get(start, prefix=True):
            try:
                other = jsonio.loads(value_of(kv))
            except jsonio.JSONDecodeError:
                continue
            if isinstance(other, dict) and other.get("machine") != me:
                self.client.txn([], [delete(mine)])
                raise HostIdTaken(
                    f"host id {self.host!r} is live on another machine ({who(other)});"
                    f" this one is {who(body)}",
                    "give each machine its own id: $LOOOP_HOST_ID or state/host-id (two"
                    " machines with one id would take each other's claims for their own)",
                )
        self._registered = lease

    # -- leases ------------------------------------------------------------------------

    def _lease_for(self, holder: Holder, linger_s: float = 0.0) -> int:
        if holder.pid is None:
            return 0  # a loop round: its claim lives as long as the round (the beat reaps it)
        if holder.pid == os.getpid():
            return self._own_lease()
        return self._keeper_lease(holder.pid, holder.create_time or 0.0, linger_s)

    def _own_lease(self) -> int:
        with self._lock:
            self._start_thread()
            if not self._own:
                self._own, self._renewed = self.client.grant(self.ttl)
            return self._own

    def _ensure_keeper(self) -> None:
        with self._lock:
            self._start_thread()

    def _start_thread(self) -> None:
        """The thread renewing this process's leases (the caller holds self._lock)."""
        if self._own_pid != os.getpid():  # forked: the parent's lease and thread are not ours
            self._own, self._own_pid, self._thread = 0, os.getpid(), None
            self._stop = threading.Event()
        if self._thread is None:
            self._thread = threading.Thread(target=self._keep_own, daemon=True)
            self._thread.start()

    def _keep_own(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            with contextlib.suppress(Unavailable):
                self.election.renew()  # the pulse lease, while a beat (or `looop up`) runs
            lease = self._own
            if not lease:
                continue
            try:
                ttl, sent = self.client.refresh(lease)
                alive = ttl > 0
            except Unavailable:
                continue  # etcd will be back, or the lease lapses and its claims with it
            with self._lock:
                if self._own != lease:
                    continue
                if alive:
                    self._renewed = max(self._renewed, sent)
                else:
                    self._own = 0

    def _keeper_lease(self, pid: int, created: float, linger_s: float = 0.0) -> int:
        """The lease of another process on this host, and a keeper for it if it has none."""
        tail = f"-linger{round(linger_s)}" if linger_s > 0 else ""
        rkey = self.key("leases", self.host, f"{pid}-{round(created * 100)}{tail}")
        for _ in range(MAX_TRIES):
            found = self.client.get(rkey)
            if found:
                return int(value_of(found[0]))
            lease, _ = self.client.grant(self.ttl)
            ok, _ = self.client.txn(
                [cmp(rkey, "CREATE", "EQUAL", 0)], [put(rkey, str(lease).encode(), lease)]
            )
            if ok:
                leasekeep.spawn(
                    self.paths.root,
                    self.host,
                    lease=lease,
                    pid=pid,
                    created=created,
                    linger_s=linger_s,
                )
                return lease
            self.client.revoke(lease)  # another `looop claim` of this holder won: use its lease
        raise Busy(f"the lease of process {pid} changed {MAX_TRIES} times in a row")

    def keep(self, lease: int, pid: int, created: float, linger_s: float = 0.0) -> str:
        """A keeper's loop (coord/leasekeep.py): `lease` kept while process `pid` lives."""
        return leasekeep.keep(
            self.client, self.ttl, lease=lease, pid=pid, created=created, linger_s=linger_s
        )

    def close(self) -> None:
        """Stop keeping this process's lease and revoke it: its claims go at once."""
        self._stop.set()
        with self._lock:
            lease, self._own = self._own, 0
        if lease and self._own_pid == os.getpid():
            with contextlib.suppress(Unavailable):
                self.client.revoke(lease)
