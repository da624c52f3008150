"""Claims: named leases with fencing epochs, so no two workers touch one target at once.

`claims/<name>.json` = {name, session, pid, create_time, epoch, acquired_at,
expires_at, ttl_s}. The holder is a process (for a worker, the worker's own
pid, from its session record), so a claim dies with its holder: it is reaped
when that process is gone (or its pid was recycled), or when its ttl passed
without a renewal. A liveness check that errors counts as alive.

Every change to one name happens under a per-name lock file (filelock lives
here) with compare-then-atomic-write, so acquiring is atomic across processes.
The epoch grows by one at each new holder; the last claim of a name is moved,
not deleted, to `claims/.released/`, so epochs never go backwards and a
holder can hand its epoch to whatever it writes to as a fencing token.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from looop_py import identity, jsonio
from looop_py.errors import Busy, ClaimHeld, CorruptFile, UsageError
from looop_py.workdir.paths import Paths, check_segment, is_safe_segment
from looop_py.workers import records

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

LOCKS = ".locks"
RELEASED = ".released"
LOCK_TIMEOUT_S = 10.0
POLL_S = 0.002  # the per-name lock is held for well under a millisecond
DEBRIS_GRACE_S = 10.0  # an unreadable claim file older than this is removed by the reaper


@dataclass(frozen=True)
class Holder:
    """Who asks: a session label (optional) and the process whose life the claim follows.

    A loop round holds its target across many beats and processes, so it is a
    holder without a process (`round_holder`): its claim lives as long as the
    round does (`reap` is told how to ask).
    """

    session: str | None
    pid: int | None
    create_time: float | None


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
def _locked(paths: Paths, name: str) -> Iterator[None]:
    from filelock import FileLock, Timeout

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


def _read(path: Path) -> tuple[Claim | None, bool]:
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
    released, _ = _read(paths.claims / RELEASED / f"{name}.json")
    return released.epoch if released else 0


def _release(paths: Paths, name: str, cur: Claim | None) -> None:
    """Move the claim aside (keeping its epoch) rather than delete it; debris is deleted."""
    if cur is None or cur.epoch < _last_epoch(paths, name):  # never lower the last epoch
        with contextlib.suppress(FileNotFoundError):
            os.unlink(claim_path(paths, name))
        return
    released = paths.claims / RELEASED
    released.mkdir(exist_ok=True)
    os.replace(claim_path(paths, name), released / f"{name}.json")


# -- who is asking ---------------------------------------------------------------------


def resolve_holder(paths: Paths, session: str | None, pid: int | None) -> Holder:
    """The holder for a command line: a live worker's own process, else `pid` (the caller's parent).

    Inside a worker, $LOOOP_SESSION_ID names the session and the claim follows
    the worker's life. Elsewhere the claim follows the process that ran
    `looop claim` (a shell, a script), or the one `--pid` names.
    """
    if session is not None:
        check_segment(session, "session id")
        if pid is None:
            meta = records.read_meta(paths, session)
            if isinstance(meta.get("pid"), int):
                if not identity.is_alive(meta["pid"], meta.get("create_time")):
                    raise UsageError(
                        f"worker {session} is not alive, so it cannot hold a claim",
                        "claims follow their holder's life; start the worker again",
                    )
                return Holder(session, meta["pid"], float(meta["create_time"]))
    if pid is None:
        pid = os.getppid()
    created = identity.create_time(pid)
    if created is None:
        raise UsageError(f"process {pid} is not running", "pass the pid of a live process")
    return Holder(session, pid, created)


ROUND_PREFIX = "round."


def round_holder(round_id: str) -> Holder:
    """A loop round as a holder: no process; the reaper asks whether the round is still live."""
    return Holder(ROUND_PREFIX + check_segment(round_id, "round id"), None, None)


def own_holder(session: str | None = None) -> Holder:
    """This very process as a holder (for code calling the API in process)."""
    pid = os.getpid()
    created = identity.create_time(pid)
    assert created is not None
    return Holder(session, pid, created)


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
    cur, _ = _read(path)
    if cur is not None and not cur.held_by(holder) and cur.live(now):
        raise _held(name, cur)
    with _locked(paths, name):
        cur, unreadable = _read(path)
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
    with _locked(paths, name):
        cur, unreadable = _read(path)
        if cur is None and not unreadable:
            return None
        if cur is not None and not cur.held_by(holder) and cur.live(now):
            raise ClaimHeld(
                f"{name} is held by {cur.describe()}, not by you",
                "only its holder releases a live claim; it goes when its holder dies",
            )
        _release(paths, name, cur)
        return cur


# -- the live set and the reaper ---------------------------------------------------------------


@dataclass(frozen=True)
class ClaimView:
    name: str
    claim: Claim | None  # None: unreadable
    live: bool

    def to_json(self) -> dict[str, Any]:
        body = self.claim.to_json() if self.claim else {"name": self.name, "unreadable": True}
        return {**body, "live": self.live}


def _claim_files(paths: Paths) -> list[tuple[str, Path]]:
    try:
        entries = sorted(os.scandir(paths.claims), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        stem = entry.name.removesuffix(".json")
        if stem != entry.name and is_safe_segment(stem) and entry.is_file():
            found.append((stem, Path(entry.path)))
    return found


def list_claims(paths: Paths, now: float) -> list[ClaimView]:
    """Every claim file, sorted by name; unreadable ones count as live (fail closed)."""
    views = []
    for name, path in _claim_files(paths):
        cur, _ = _read(path)
        views.append(ClaimView(name, cur, cur.live(now) if cur else True))
    return views


def reap(paths: Paths, now: float, round_live: Callable[[str], bool]) -> list[dict[str, Any]]:
    """Remove claims whose holder is dead or whose ttl passed; one event dict per claim.

    A round's claim has no process to look at: it goes when `round_live(round id)`
    says the round has ended (the caller asks the loops side; claims never read rounds/).
    """
    events: list[dict[str, Any]] = []
    for name, path in _claim_files(paths):
        reason = _reap_reason(path, now, round_live)
        if reason is None:
            continue  # live: no lock needed to leave it alone
        with _locked(paths, name):
            cur, _ = _read(path)
            if _reap_reason(path, now, round_live) is None:
                continue  # taken over while we waited for the lock
            _release(paths, name, cur)
        event: dict[str, Any] = {"event": "claim_reaped", "name": name, "reason": reason}
        if cur is not None:
            event.update(session=cur.session, pid=cur.pid, epoch=cur.epoch)
        events.append(event)
    return events


def _reap_reason(path: Path, now: float, round_live: Callable[[str], bool]) -> str | None:
    cur, unreadable = _read(path)
    if cur is not None and cur.pid is None and (cur.session or "").startswith(ROUND_PREFIX):
        if cur.expired(now):
            return "expired"
        round_id = (cur.session or "").removeprefix(ROUND_PREFIX)
        return None if round_live(round_id) else "round-ended"
    if cur is None or cur.pid is None:
        if not unreadable and cur is None:
            return None  # gone already
        try:
            old = now - path.stat().st_mtime > DEBRIS_GRACE_S
        except FileNotFoundError:
            return None
        return "unreadable" if old else None
    if cur.expired(now):
        return "expired"
    if not cur.holder_alive():
        return "holder-dead"
    return None
