"""A claim name's lock file, `claims/.locks/<name>.lock`: its flock, and what it records.

Every change to a name's claim file happens under a flock on this file, taken on
a descriptor opened for that one acquisition (so threads and forked children
exclude each other too) and dropped by closing it.

It records, written under that lock, in one fixed-width block (so a shorter
record never needs a truncation)::

    <epoch>, padded with spaces to 32 bytes
    <epoch> <pid> <create_time> <acquired_at> <expires_at> <ttl_s> <session>\\n

The first 32 bytes are the name's last epoch, as an older looop wrote and reads
them (alone); it only grows. The second line (Python literals: None, numbers, a
quoted ASCII session) names the holder of the claim file looop wrote at that
epoch, while that file is there: every looop that writes or removes the claim
file rewrites it, so a release can tell whose the claim is without opening the
claim file. It is trusted only when it repeats the first line's epoch (an older
looop, which wrote the first line alone, leaves it stale) and reads back to
exactly what was written; anything else reads the claim file.
"""

from __future__ import annotations

import fcntl
import os

from looop_py.errors import Busy
from looop_py.locks import flock_within

LOCKS = ".locks"
HEAD = 32  # bytes of the epoch (an older looop reads only these)
RECORD = 320  # bytes in all: the widest record (a 128-character session) fits
POLL_S = 0.0001  # off the main thread: the lock is held for well under a millisecond …
POLL_MAX_S = 0.002  # … then back off, so many waiters on few cores leave the holder a CPU

# (pid, create_time, acquired_at, expires_at, ttl_s, session): a claim, as recorded.
Held = tuple[int | None, float | None, float, float | None, float | None, str | None]


def lock(root: str, name: str, timeout_s: float) -> int:
    """The descriptor of `name`'s lock file, locked; the caller closes it to unlock.

    Busy if it stays taken for `timeout_s`.
    """
    locks = f"{root}/claims/{LOCKS}"
    path = f"{locks}/{name}.lock"
    try:  # without O_CREAT, which would take the directory's lock on every open
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        os.makedirs(locks, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            _wait(fd, name, timeout_s)
        except BaseException:
            os.close(fd)
            raise
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Expired(Exception):
    """Raised by the SIGALRM handler into a flock that waited too long."""


def _wait(fd: int, name: str, timeout_s: float) -> None:
    """Wait for the flock the way a bare flock loop does: blocked in flock(2), woken
    by the kernel the moment it is free, and cut off by an interval timer after
    `timeout_s`. A signal handler can only be set on the main thread, and a timer
    or handler someone else armed is theirs: then poll instead."""
    import signal  # only a contended lock waits: claims that never wait do not load it

    busy = Busy(f"the lock of claim {name} stayed taken for {timeout_s:.0f} s")
    if signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0):
        return _poll(fd, timeout_s, busy)
    if signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, signal.SIG_IGN):
        return _poll(fd, timeout_s, busy)

    waiting = [True]

    def expire(signum: int, frame: object) -> None:
        if waiting[0]:  # once past the flock, a late tick must not escape into the caller
            raise _Expired

    try:
        before = signal.signal(signal.SIGALRM, expire)
    except ValueError:  # not the main thread
        return _poll(fd, timeout_s, busy)
    try:
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        fcntl.flock(fd, fcntl.LOCK_EX)
        waiting[0] = False
    except _Expired:
        raise busy from None
    finally:
        waiting[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    return None


def _poll(fd: int, timeout_s: float, busy: Busy) -> None:
    if not flock_within(fd, timeout_s, POLL_S, POLL_MAX_S):
        raise busy


def load(fd: int) -> tuple[int, Held | None]:
    """(last epoch, the recorded holder's claim or None) from the lock file (held by the caller)."""
    data = os.pread(fd, RECORD, 0)
    first = data[:HEAD].strip()
    if not first.isdigit():
        return 0, None
    words = data[HEAD:].split()
    if len(words) != 7 or words[0] != first:
        return int(first), None  # no holder, or one an older looop left stale
    return int(first), _parse(words)


def _parse(words: list[bytes]) -> Held | None:
    _, pid, created, acquired, expires, ttl, session = words
    try:
        held = (
            None if pid == b"None" else int(pid),
            None if created == b"None" else float(created),
            float(acquired),
            None if expires == b"None" else float(expires),
            None if ttl == b"None" else float(ttl),
            None if session == b"None" else session[1:-1].decode("ascii"),
        )
    except ValueError:  # UnicodeDecodeError included
        return None
    if held[5] is not None and b"%a" % held[5] != session:
        return None  # not a session this record could have written: quotes, escapes …
    return held


def store(fd: int, epoch: int, held: Held | None) -> None:
    """Record `epoch` and who holds the claim written at it (None: nobody, or a holder
    the record cannot spell; a release then reads the claim file)."""
    if held is not None:
        # %a: ASCII literals, so a session with a space, a quote or an escape does not
        # read back the same, and is not trusted (load).
        body = b"%-31d\n%d %a %a %a %a %a %a\n" % (epoch, epoch, *held)
        if len(body) <= RECORD:
            os.pwrite(fd, body.ljust(RECORD), 0)  # fixed width: no truncation
            return
    os.pwrite(fd, (b"%-31d\n" % epoch).ljust(RECORD), 0)
