"""Claims: named leases with fencing epochs, so no two workers touch one target at once.

`claims/<name>.json` = {name, session, pid, create_time, epoch, acquired_at,
expires_at, ttl_s}. The holder is a process (coord/holders.py), so a claim
dies with its holder: it is reaped (coord/reaper.py) when that process is
gone (or its pid was recycled), or when its ttl passed without a renewal.
A liveness check that errors counts as alive.

Every change to one name happens under that name's lock file,
`claims/.locks/<name>.lock` (coord/lockfile.py: a flock on a descriptor opened
for that one acquisition, so threads and forked children exclude each other
too), then compare-then-write, so acquiring is atomic across processes. The
lock file also records the name's last epoch, written under the lock before
the claim file: the epoch grows by one at each new holder and never goes back,
so a release only unlinks the claim file and a holder can hand its epoch to
whatever it writes to as a fencing token. While looop's claim file is there,
the lock file also names its holder.

Per cycle, like a bare flock loop: a free name is taken with one O_EXCL open
under its lock (no read); its holder's release unlinks it on the lock file's
word (no read); a claim file found in the way, or a release the record cannot
vouch for, reads the claim file once, and a refused claim asks its holder's
liveness (a /proc read) after the lock is dropped, since a refusal needs no lock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py import identity, jsonio
from looop_py.coord import lockfile
from looop_py.errors import ClaimHeld, CorruptFile, UsageError
from looop_py.ids import check_segment
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.coord.holders import Holder

LOCKS = lockfile.LOCKS
LOCK_TIMEOUT_S = 10.0
_FIRST_READ = 4096  # one read of a claim file; a longer file goes to the careful reader


@dataclass(frozen=True, slots=True)
class Claim:
    name: str
    session: str | None
    pid: int | None
    create_time: float | None
    epoch: int
    acquired_at: float
    expires_at: float | None = None
    ttl_s: float | None = None
    host: str | None = None  # the host it was taken on (a shared backend; None: this one)

    @classmethod
    def taken(
        cls,
        name: str,
        holder: Holder,
        epoch: int,
        *,
        now: float,
        ttl_s: float | None,
        host: str | None = None,
    ) -> Claim:
        """A new holder's claim on `name`, from `now`, at `epoch`."""
        expires = None if ttl_s is None else now + ttl_s
        return cls(
            name, holder.session, holder.pid, holder.create_time, epoch, now, expires, ttl_s, host
        )

    def renewed(self, now: float, ttl_s: float | None) -> Claim:
        """This claim pushed to now + ttl (`ttl_s`, else its own)."""
        ttl = ttl_s if ttl_s is not None else self.ttl_s
        return replace(self, expires_at=None if ttl is None else now + ttl, ttl_s=ttl)

    @classmethod
    def from_json(cls, name: str, body: Any) -> Claim | None:
        if not isinstance(body, dict):
            return None
        pid, epoch = body.get("pid"), body.get("epoch")
        return cls(
            name=name,
            session=body.get("session") if isinstance(body.get("session"), str) else None,
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            create_time=jsonio.number(body.get("create_time")),
            epoch=epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0,
            acquired_at=jsonio.number(body.get("acquired_at")) or 0.0,
            expires_at=jsonio.number(body.get("expires_at")),
            ttl_s=jsonio.number(body.get("ttl_s")),
            host=body.get("host") if isinstance(body.get("host"), str) else None,
        )

    def to_json(self) -> dict[str, Any]:
        body = {
            "name": self.name,
            "session": self.session,
            "pid": self.pid,
            "create_time": self.create_time,
            "epoch": self.epoch,
            "acquired_at": self.acquired_at,
            "expires_at": self.expires_at,
            "ttl_s": self.ttl_s,
        }
        if self.host is not None:
            body["host"] = self.host
        return body

    @classmethod
    def recorded(cls, name: str, epoch: int, held: lockfile.Held) -> Claim:
        """The claim a lock file records (coord/lockfile.py) as held at `epoch`."""
        pid, created, acquired, expires, ttl, session = held
        return cls(name, session, pid, created, epoch, acquired, expires, ttl)

    def record(self) -> lockfile.Held:
        """What the lock file records of this claim."""
        return (
            self.pid,
            self.create_time,
            self.acquired_at,
            self.expires_at,
            self.ttl_s,
            self.session,
        )

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
        where = f" on {self.host}" if self.host else ""
        return f"{who} (pid {self.pid}{where}, epoch {self.epoch})"


@dataclass(frozen=True, slots=True)
class Outcome:
    claim: Claim
    action: str  # acquired | held (already ours, unchanged) | renewed


def claim_path(paths: Paths, name: str) -> str:
    """Where claim `name` lives (a str: claims are hot, and pathlib is not free)."""
    return f"{paths.root}/claims/{check_segment(name, 'claim name')}.json"


@contextlib.contextmanager
def locked(paths: Paths, name: str) -> Iterator[int]:
    """Hold the per-name lock of claim `name`; yields the lock file's descriptor.

    Busy if it stays taken for LOCK_TIMEOUT_S.
    """
    fd = lockfile.lock(str(paths.root), name, LOCK_TIMEOUT_S)
    try:
        yield fd
    finally:
        os.close(fd)  # closing this descriptor drops the flock


def read_claim(path: Path | str, name: str | None = None) -> tuple[Claim | None, bool]:
    """(claim, unreadable): a missing file is (None, False).

    One open and one read: a claim file is a few hundred bytes. A file that
    fills the first read (past any claim looop writes) goes to jsonio's careful
    reader, which caps it and says what is wrong with it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block
    except FileNotFoundError:
        return None, False
    except OSError:
        return None, True
    try:
        data = os.read(fd, _FIRST_READ)
    except OSError:  # a directory, say
        return None, True
    finally:
        os.close(fd)
    if len(data) >= _FIRST_READ:
        try:
            body = jsonio.read_json(path)
        except (CorruptFile, OSError):
            return None, True
        if body is None:
            return None, False
    else:
        try:
            body = jsonio.loads(data)
        except jsonio.JSONDecodeError:
            return None, True
    found = Claim.from_json(name or os.path.basename(path).removesuffix(".json"), body)
    return found, found is None


def set_aside(paths: Paths, name: str, fd: int) -> None:
    """Remove the claim file (the caller holds its lock, as `fd`); its epoch stays in the
    lock file, which no longer names a holder."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(claim_path(paths, name))
    lockfile.store(fd, lockfile.load(fd)[0], None)


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
    """Take `name` for `holder`, or raise ClaimHeld naming the live holder that has it.

    Under the name's lock, a free name is taken in one O_EXCL open, the way a
    bare flock loop would: no read, no parse. Only when the claim file is
    already there is its holder looked up: in the lock file's record, else by
    reading the claim file (once).
    """
    path = claim_path(paths, name)
    check_ttl(ttl_s)
    root = str(paths.root)
    fd = lockfile.lock(root, name, LOCK_TIMEOUT_S)
    try:
        seen = None
        if not renew:
            try:
                out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            except FileExistsError:  # whose: the lock file's word, else the claim file's
                epoch, held = lockfile.load(fd)
                seen = (
                    read_claim(path, name)
                    if held is None
                    else (Claim.recorded(name, epoch, held), False)
                )
            else:
                return _fill(out, path, fd, name, holder, now=now, ttl_s=ttl_s)
            cur = seen[0]
            if cur is not None and not cur.expired(now) and not cur.held_by(holder):
                # Someone else's: ask whether it lives (a /proc read) without the lock,
                # so contended waiters are not held up. A refusal needs no lock.
                os.close(fd)
                fd = -1
                if cur.holder_alive():
                    raise held_error(name, cur)
                fd = lockfile.lock(root, name, LOCK_TIMEOUT_S)  # a dead holder's: look again
                seen = None
        return _decide(path, fd, name, holder, ttl_s=ttl_s, renew=renew, now=now, seen=seen)
    finally:
        if fd >= 0:
            os.close(fd)  # drops the flock


def _decide(
    path: str,
    fd: int,
    name: str,
    holder: Holder,
    *,
    ttl_s: float | None,
    renew: bool,
    now: float,
    seen: tuple[Claim | None, bool] | None,
) -> Outcome:
    """`claim` when its claim file is there (or a renewal), under the lock (`fd`); `seen`
    is what read_claim found under this same hold, if it was read already."""
    cur, unreadable = seen if seen is not None else read_claim(path, name)
    if unreadable:
        raise CorruptFile(
            f"{path} is unreadable, so nobody can tell who holds {name}",
            "remove it if you are sure; the next beat removes it after a few seconds",
        )
    if cur is not None and not cur.expired(now):
        if cur.held_by(holder):
            if not renew:
                return Outcome(cur, "held")
            renewed = cur.renewed(now, ttl_s)
            jsonio.write_json(Path(path), renewed.to_json(), durable=False)
            last = lockfile.load(fd)[0]
            lockfile.store(fd, last, renewed.record() if renewed.epoch == last else None)
            return Outcome(renewed, "renewed")
        if cur.holder_alive():
            raise held_error(name, cur)
    if renew:
        raise lapsed_error(name, cur, now)
    # Free, or its holder is dead, or its ttl passed: a new holder, a new epoch.
    epoch = max(lockfile.load(fd)[0], cur.epoch if cur else 0) + 1
    new = Claim.taken(name, holder, epoch, now=now, ttl_s=ttl_s)
    lockfile.store(fd, epoch, new.record())  # first: a holder that dies next never has its
    # epoch reused
    # No fsync: a lease dies with its holder, and a power loss ends every holder.
    body = jsonio.dumps(new.to_json(), pretty=True) + b"\n"
    if cur is None:
        _create(path, body)
    else:  # replacing a dead holder's claim: readers see the old one or the new one
        jsonio.atomic_write(Path(path), body, durable=False)
    return Outcome(new, "acquired")


def _fill(
    out: int, path: str, fd: int, name: str, holder: Holder, *, now: float, ttl_s: float | None
) -> Outcome:
    """Write the claim file just created as `out` (closing it): the name's next epoch, which
    goes to the lock file (held as `fd`) before the claim names it.

    Lock-free readers may find the file empty for an instant: unreadable, so they
    fail closed. A creator that dies before its write leaves it empty: unreadable
    too, never taken over, and the reaper removes it once it is old.
    """
    epoch = 0
    try:
        epoch = lockfile.load(fd)[0] + 1
        new = Claim.taken(name, holder, epoch, now=now, ttl_s=ttl_s)
        # First: a holder that dies next never has its epoch reused.
        lockfile.store(fd, epoch, new.record())
        # No fsync: a lease dies with its holder, and a power loss ends every holder.
        os.write(out, jsonio.dumps(new.to_json(), pretty=True) + b"\n")  # one write
    except BaseException:
        os.unlink(path)
        if epoch:  # the epoch stays spent; the record names nobody, since no claim is there
            with contextlib.suppress(OSError):
                lockfile.store(fd, epoch, None)
        raise
    finally:
        os.close(out)
    return Outcome(new, "acquired")


def _create(path: str, body: bytes) -> None:
    """Write a claim file that did not exist, in one write and without a rename.

    Lock-free readers may find it empty for an instant: unreadable, so they fail
    closed (count it live, or take the lock and look again).
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, body)  # a few hundred bytes: one write
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(fd)


def check_ttl(ttl_s: float | None) -> None:
    if ttl_s is not None and ttl_s <= 0:
        raise UsageError("--ttl must be positive")


def held_error(name: str, cur: Claim) -> ClaimHeld:
    """Claiming what a live holder has: refused, naming it."""
    return ClaimHeld(
        f"{name} is held by {cur.describe()}",
        "do not proceed; retry later (`looop claims` shows who holds what)",
    )


def lapsed_error(name: str, cur: Claim | None, now: float) -> ClaimHeld:
    """`--renew` of a lease that is no longer the caller's: refused, never re-taken, since
    whatever the old epoch guarded may have changed hands in between."""
    if cur is None:
        why = "nobody holds it"
    elif cur.expired(now):
        why = f"its ttl ran out {now - (cur.expires_at or now):.0f} s ago"
    else:
        why = f"it is held by {cur.describe()}"
    return ClaimHeld(
        f"cannot renew {name}: {why}",
        f"your lease lapsed; do not proceed on its old epoch (`looop claim {name}` takes a"
        " new one)",
    )


def not_yours_error(name: str, cur: Claim) -> ClaimHeld:
    """Releasing what another live holder has: refused, naming it."""
    return ClaimHeld(
        f"{name} is held by {cur.describe()}, not by you",
        "only its holder releases a live claim; it goes when its holder dies",
    )


def unclaim(paths: Paths, name: str, holder: Holder, *, now: float) -> Claim | None:
    """Release `name`; idempotent. Refuses (ClaimHeld) when another live holder has it.

    When the lock file names `holder` as the claim's holder, the claim file is
    unlinked without being read, as a bare flock loop would; otherwise it is read
    to see whose it is.
    """
    path = claim_path(paths, name)
    fd = lockfile.lock(str(paths.root), name, LOCK_TIMEOUT_S)
    try:
        epoch, held = lockfile.load(fd)
        if held is not None:
            mine = Claim.recorded(name, epoch, held)
            if mine.held_by(holder):
                lockfile.store(fd, epoch, None)
                try:
                    os.unlink(path)  # its epoch stays in the lock file
                except FileNotFoundError:
                    return None
                return mine
        cur, unreadable = read_claim(path, name)
        if cur is None and not unreadable:
            return None
        if cur is not None and not cur.held_by(holder) and cur.live(now):
            raise not_yours_error(name, cur)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # its epoch stays in the lock file
        if held is not None:
            lockfile.store(fd, epoch, None)
        return cur
    finally:
        os.close(fd)  # drops the flock
