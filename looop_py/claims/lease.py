"""Claims: named leases with fencing epochs, so no two workers touch one target at once.

`claims/<name>.json` = {name, session, pid, create_time, epoch, acquired_at,
expires_at, ttl_s}. The holder is a process (claims/holders.py), so a claim
dies with its holder: it is reaped (claims/reaper.py) when that process is
gone (or its pid was recycled), or when its ttl passed without a renewal.
A liveness check that errors counts as alive.

Every change to one name happens under a per-name lock file (filelock lives
here) with compare-then-atomic-write, so acquiring is atomic across processes.
The epoch grows by one at each new holder; the last claim of a name is moved,
not deleted, to `claims/.released/`, so epochs never go backwards and a
holder can hand its epoch to whatever it writes to as a fencing token.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from looop_py import identity, jsonio
from looop_py.errors import Busy, ClaimHeld, CorruptFile, UsageError
from looop_py.ids import check_segment
from looop_py.workdir.paths import Paths

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.claims.holders import Holder

LOCKS = ".locks"
RELEASED = ".released"
LOCK_TIMEOUT_S = 10.0
POLL_S = 0.002  # the per-name lock is held for well under a millisecond


@dataclass(frozen=True)
class Claim:
    name: str
    session: str | None
    pid: int | None
    create_time: float | None
    epoch: int
    acquired_at: float
    expires_at: float | None = None
    ttl_s: float | None = None

    @classmethod
    def from_json(cls, name: str, body: Any) -> Claim | None:
        if not isinstance(body, dict):
            return None
        pid, epoch = body.get("pid"), body.get("epoch")
        return cls(
            name=name,
            session=body.get("session") if isinstance(body.get("session"), str) else None,
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            create_time=_num(body.get("create_time")),
            epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0,
            acquired_at=_num(body.get("acquired_at")) or 0.0,
            expires_at=_num(body.get("expires_at")),
            ttl_s=_num(body.get("ttl_s")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "session": self.session,
            "pid": self.pid,
            "create_time": self.create_time,
            "epoch": self.epoch,
            "acquired_at": self.acquired_at,
            "expires_at": self.expires_at,
            "ttl_s": self.ttl_s,
        }

    def held_by(self, holder: Holder) -> bool:
        if holder.pid is None or holder.create_time is None:
            return self.pid is None and self.session == holder.session
        return (
            self.session == holder.session
            and self.pid == holder.pid
            and self.create_time is not None
            and abs(self.create_time - holder.create_time) <= identity.CREATE_TIME_SLACK_S
        )

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def holder_alive(self) -> bool:
        if self.pid is None:
            return True  # nobody to look at: fail closed (the reaper clears such debris)
        return identity.is_alive(self.pid, self.create_time)

    def live(self, now: float) -> bool:
        return not self.expired(now) and self.holder_alive()

    def describe(self) -> str:
        who = f"session {self.session}" if self.session else "a process"
        return f"{who} (pid {self.pid}, epoch {self.epoch})"


@dataclass(frozen=True)
class Outcome:
    claim: Claim
    action: str  # acquired | held (already ours, unchanged) | renewed


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def claim_path(paths: Paths, name: str) -> Path:
    return paths.claims / f"{check_segment(name, 'claim name')}.json"


_locks: dict[str, Any] = {}  # one FileLock per lock file, reused: building one is not cheap


@contextlib.contextmanager
def locked(paths: Paths, name: str) -> Iterator[None]:
    """Hold the per-name lock of claim `name` (Busy if it stays taken for LOCK_TIMEOUT_S)."""
    from filelock import FileLock, Timeout  # reading claims needs no lock: load it to write

    key = str(paths.claims / LOCKS / f"{name}.lock")
    (paths.claims / LOCKS).mkdir(parents=True, exist_ok=True)
    lock = _locks.get(key)
    if lock is None:
        lock = _locks[key] = FileLock(key)  # thread-local: threads exclude each other too
    try:
        lock.acquire(timeout=LOCK_TIMEOUT_S, poll_interval=POLL_S)
    except Timeout as exc:
        raise Busy(f"the lock of claim {name} stayed taken for {LOCK_TIMEOUT_S:.0f} s") from exc
    try:
        yield
    finally:
        lock.release()


def read_claim(path: Path) -> tuple[Claim | None, bool]:
    """(claim, unreadable): a missing file is (None, False)."""
    try:
        body = jsonio.read_json(path)
    except (CorruptFile, OSError):
        return None, True
    if body is None:
        return None, False
    found = Claim.from_json(path.stem, body)
    return found, found is None


def _last_epoch(paths: Paths, name: str) -> int:
    released, _ = read_claim(paths.claims / RELEASED / f"{name}.json")
    return released.epoch if released else 0


def set_aside(paths: Paths, name: str, cur: Claim | None) -> None:
    """Move the claim aside (keeping its epoch) rather than delete it; debris is deleted."""
    if cur is None or cur.epoch < _last_epoch(paths, name):  # never lower the last epoch
        with contextlib.suppress(FileNotFoundError):
            os.unlink(claim_path(paths, name))
        return
    released = paths.claims / RELEASED
    released.mkdir(exist_ok=True)
    os.replace(claim_path(paths, name), released / f"{name}.json")


# -- claim / unclaim -----------------------------------------------------------------------


def claim(
    paths: Paths,
    name: str,
    holder: Holder,
    *,
    ttl_s: float | None = None,
    renew: bool = False,
    now: float,
) -> Outcome:
    """Take `name` for `holder`, or raise ClaimHeld naming the live holder that has it."""
    path = claim_path(paths, name)
    if ttl_s is not None and ttl_s <= 0:
        raise UsageError("--ttl must be positive")
    # A lock-free look first (claim files are replaced atomically): refusing a
    # live holder needs no lock, which keeps contended retries cheap.
    cur, _ = read_claim(path)
    if cur is not None and not cur.held_by(holder) and cur.live(now):
        raise _held(name, cur)
    with locked(paths, name):
        cur, unreadable = read_claim(path)
        if unreadable:
            raise CorruptFile(
                f"{path} is unreadable, so nobody can tell who holds {name}",
                "remove it if you are sure; the next beat removes it after a few seconds",
            )
        if cur is not None and not cur.expired(now):
            if cur.held_by(holder):
                if not renew:
                    return Outcome(cur, "held")
                ttl = ttl_s if ttl_s is not None else cur.ttl_s
                renewed = Claim(
                    name,
                    cur.session,
                    cur.pid,
                    cur.create_time,
                    cur.epoch,
                    cur.acquired_at,
                    None if ttl is None else now + ttl,
                    ttl,
                )
                jsonio.write_json(path, renewed.to_json(), durable=False)
                return Outcome(renewed, "renewed")
            if cur.holder_alive():
                raise _held(name, cur)
        # Free, or its holder is dead, or its ttl passed: a new holder, a new epoch.
        epoch = max(_last_epoch(paths, name), cur.epoch if cur else 0) + 1
        new = Claim(
            name,
            holder.session,
            holder.pid,
            holder.create_time,
            epoch,
            now,
            None if ttl_s is None else now + ttl_s,
            ttl_s,
        )
        # No fsync: a lease dies with its holder, and a power loss ends every holder.
        jsonio.write_json(path, new.to_json(), durable=False)
        return Outcome(new, "acquired")


def _held(name: str, cur: Claim) -> ClaimHeld:
    return ClaimHeld(
        f"{name} is held by {cur.describe()}",
        "do not proceed; retry later (`looop claims` shows who holds what)",
    )


def unclaim(paths: Paths, name: str, holder: Holder, *, now: float) -> Claim | None:
    """Release `name`; idempotent. Refuses (ClaimHeld) when another live holder has it."""
    path = claim_path(paths, name)
    with locked(paths, name):
        cur, unreadable = read_claim(path)
        if cur is None and not unreadable:
            return None
        if cur is not None and not cur.held_by(holder) and cur.live(now):
            raise ClaimHeld(
                f"{name} is held by {cur.describe()}, not by you",
                "only its holder releases a live claim; it goes when its holder dies",
            )
        set_aside(paths, name, cur)
        return cur
