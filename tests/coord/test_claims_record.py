"""The lock file names the claim's holder, so a release needs no read of the claim file; and
a waiter blocks in flock(2), as a bare flock loop does. Hostile cases first: a record that
is stale, garbled, cleared or unspellable is never trusted over the claim file."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time

import pytest

from looop_py import identity
from looop_py.coord import holders, lockfile
from looop_py.coord import lease as claims
from looop_py.coord.reaper import reap
from looop_py.errors import ClaimHeld
from looop_py.workdir.paths import Paths
from tests.conftest import wait_for


def _lock_bytes(wd: Paths, name: str = "repo") -> bytes:
    return (wd.claims / claims.LOCKS / f"{name}.lock").read_bytes()


def _recorded(wd: Paths, name: str = "repo") -> tuple[int, lockfile.Held | None]:
    with claims.locked(wd, name) as fd:
        return lockfile.load(fd)


def _write_claim(wd: Paths, holder: holders.Holder, epoch: int) -> None:
    """A claim file written the way an older looop (or a person) would: no record."""
    body = claims.Claim.taken("repo", holder, epoch, now=time.time(), ttl_s=None)
    from looop_py import jsonio

    with open(claims.claim_path(wd, "repo"), "wb") as f:
        f.write(jsonio.dumps(body.to_json(), pretty=True))


def test_a_record_an_older_looop_left_stale_is_not_trusted(wd: Paths) -> None:
    """me holds at epoch 1 (recorded); an older looop releases (unlinks only) and another
    live holder takes it at epoch 2 (writing the epoch alone): the record still says me at
    epoch 1, and my release must read the claim file and refuse."""
    me, other = holders.own_holder("me"), holders.own_holder("other")
    claims.claim(wd, "repo", me, now=time.time())
    os.unlink(claims.claim_path(wd, "repo"))  # the older looop's release
    with claims.locked(wd, "repo") as fd:  # the older looop's claim: b"%d\n" at offset 0
        assert int(os.pread(fd, 32, 0).strip()) == 1  # it can read the epoch we wrote
        os.pwrite(fd, b"2\n", 0)
    _write_claim(wd, other, 2)
    assert _recorded(wd) == (2, None)
    with pytest.raises(ClaimHeld, match="session other"):
        claims.unclaim(wd, "repo", me, now=time.time())
    assert os.path.exists(claims.claim_path(wd, "repo"))
    assert claims.unclaim(wd, "repo", other, now=time.time()) is not None
    assert claims.claim(wd, "repo", me, now=time.time()).claim.epoch == 3


def test_a_claim_written_by_hand_after_a_release_survives_a_second_release(wd: Paths) -> None:
    me, other = holders.own_holder("me"), holders.own_holder("other")
    claims.claim(wd, "repo", me, now=time.time())
    assert claims.unclaim(wd, "repo", me, now=time.time()) is not None
    assert _recorded(wd) == (1, None)  # a release clears the holder, keeps the epoch
    _write_claim(wd, other, 7)
    with pytest.raises(ClaimHeld, match="not by you"):
        claims.unclaim(wd, "repo", me, now=time.time())
    assert os.path.exists(claims.claim_path(wd, "repo"))


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00" * 320,
        b"1" + b" " * 30 + b"\n" + b"1 x y z\n",  # names nobody it can parse
        b"1" + b" " * 30 + b"\n" + b"1 None None 5.0 None None 'me' extra\n",  # a word too many
        b"1" + b" " * 30 + b"\n" + b"1 None None 5.0 None 'me'\n",  # one too few
        b"1" + b" " * 30 + b"\n" + b"1 None None 5.0 None None me\n",  # a session unquoted
        b"1" + b" " * 30 + b"\n" + b"1 None None 5.0 None None 'm\\x65'\n",  # an escape
        b"1" + b" " * 30 + b"\n" + b"1 None None 5.0 None None '\xc3\xa9'\n",  # not ASCII
        b"1" + b" " * 30 + b"\n" + b"1 - - 5.0 - - 'me'\n",  # no numbers
        b"1\n1 None None 5.0 None None 'me'\n",  # the holder line not where the record puts it
        b"\xff" * 5000,
    ],
)
def test_a_garbled_lock_file_is_not_trusted(wd: Paths, garbage: bytes) -> None:
    """Whatever the lock file says that does not parse whole, the claim file decides."""
    me, other = holders.own_holder("me"), holders.Holder("me", None, None)
    claims.claim(wd, "repo", me, now=time.time())
    (wd.claims / claims.LOCKS / "repo.lock").write_bytes(garbage)
    with pytest.raises(ClaimHeld, match="not by you"):  # a holder without a process: "me"
        claims.unclaim(wd, "repo", other, now=time.time())
    released = claims.unclaim(wd, "repo", me, now=time.time())
    assert released is not None and released.epoch == 1  # read from the claim file
    assert claims.claim(wd, "repo", me, now=time.time()).action == "acquired"


def test_the_holder_the_record_names_releases_without_reading_the_claim_file(wd: Paths) -> None:
    """The control for the garbled cases: a record that reads back whole is trusted."""
    rnd = holders.Holder("me", None, None)
    got = claims.claim(wd, "repo", rnd, now=5.0)
    assert _lock_bytes(wd)[32:].rstrip() == b"1 None None 5.0 None None 'me'"
    with open(claims.claim_path(wd, "repo"), "wb") as f:
        f.write(b"{" * 100)  # read, this would be CorruptFile
    assert claims.unclaim(wd, "repo", rnd, now=6.0) == got.claim
    assert not os.path.exists(claims.claim_path(wd, "repo"))


def test_a_session_the_record_cannot_spell_falls_back_to_the_claim_file(wd: Paths) -> None:
    odd = holders.own_holder("two words\n")
    other = holders.own_holder("two")
    got = claims.claim(wd, "repo", odd, now=time.time())
    assert _recorded(wd) == (1, None)
    with pytest.raises(ClaimHeld, match="not by you"):
        claims.unclaim(wd, "repo", other, now=time.time())
    assert claims.unclaim(wd, "repo", odd, now=time.time()) == got.claim


def test_a_reaped_claim_leaves_the_epoch_and_no_holder(wd: Paths) -> None:
    me = holders.own_holder("me")
    ghost = holders.Holder("ghost", me.pid, (me.create_time or 0) - 500)  # a recycled pid
    claims.claim(wd, "repo", ghost, now=time.time())
    assert _recorded(wd)[1] is not None
    events = reap(wd, time.time(), lambda _round: True)
    assert [e["reason"] for e in events] == ["holder-dead"]
    assert _recorded(wd) == (1, None)


def test_a_release_by_anyone_else_is_refused_while_the_record_names_the_holder(
    wd: Paths,
) -> None:
    me = holders.own_holder("me")
    child = subprocess.Popen([sys.executable, "-c", "input()"], stdin=subprocess.PIPE)
    try:
        # The same session label, another live process.
        them = holders.Holder("me", child.pid, identity.create_time(child.pid))
        got = claims.claim(wd, "repo", me, ttl_s=60, now=time.time())
        for stranger in (them, holders.own_holder("other"), holders.Holder("me", None, None)):
            with pytest.raises(ClaimHeld, match="not by you"):
                claims.unclaim(wd, "repo", stranger, now=time.time())
        assert _recorded(wd) == (1, got.claim.record())
        assert claims.unclaim(wd, "repo", me, now=time.time()) == got.claim
    finally:
        child.kill()
        child.wait()


def test_the_release_returns_the_claim_as_renewed_and_as_taken(wd: Paths) -> None:
    me, rnd = holders.own_holder("me"), holders.round_holder("r1")
    got = claims.claim(wd, "repo", me, ttl_s=5, now=1000.0)
    renewed = claims.claim(wd, "repo", me, ttl_s=60, renew=True, now=1001.5)
    assert renewed.claim.expires_at == 1061.5 and renewed.claim.epoch == got.claim.epoch
    assert claims.unclaim(wd, "repo", me, now=1002.0) == renewed.claim
    taken = claims.claim(wd, "repo", rnd, now=time.time())  # a round: no process
    assert _recorded(wd) == (2, taken.claim.record())
    assert claims.unclaim(wd, "repo", rnd, now=time.time()) == taken.claim
    assert claims.unclaim(wd, "repo", rnd, now=time.time()) is None  # idempotent


def test_the_record_keeps_the_epoch_where_an_older_looop_reads_it(wd: Paths) -> None:
    me = holders.own_holder("me-" + "x" * 125)  # the longest session a segment allows
    for epoch in (1, 2, 3):
        claims.claim(wd, "repo", me, ttl_s=1e9, now=time.time())
        data = _lock_bytes(wd)
        assert len(data) == lockfile.RECORD and int(data[:32].strip()) == epoch
        assert _recorded(wd)[1] is not None  # it fits
        claims.unclaim(wd, "repo", me, now=time.time())
        assert _recorded(wd) == (epoch, None)


# -- the wait: blocked in flock on the main thread, polled elsewhere, Busy after its time -----
# In a process of its own: pytest-timeout arms SIGALRM in this one, which makes the wait poll.

_FLOCK = {"x86_64": 73, "aarch64": 32}.get(platform.machine())


def _holding(wd: Paths) -> subprocess.Popen[bytes]:
    """Another process holding repo's lock until its stdin closes."""
    return _python(
        wd,
        "with lease.locked(paths, 'repo'):\n    print('held', flush=True); sys.stdin.read()",
        b"held\n",
    )


def _python(wd: Paths, body: str, first: bytes | None = None) -> subprocess.Popen[bytes]:
    code = (
        "import signal, sys, threading, time\nfrom pathlib import Path\n"
        "from looop_py.coord import holders, lease\nfrom looop_py.errors import Busy\n"
        "from looop_py.workdir.paths import Paths\n"
        f"paths = Paths(Path({str(wd.root)!r}))\n"
        "def attempt():\n"
        "    try:\n"
        "        got = lease.claim(paths, 'repo', holders.own_holder('me'), now=time.time())\n"
        "        print('epoch', got.claim.epoch, flush=True)\n"
        "    except Busy as exc:\n"
        "        print('busy', exc, flush=True)\n"
        "def state():\n"
        "    print('timer', signal.getitimer(signal.ITIMER_REAL)[0], 'handler',\n"
        "          signal.getsignal(signal.SIGALRM) == signal.SIG_DFL, flush=True)\n" + body + "\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    if first is not None:
        assert proc.stdout is not None and proc.stdout.readline() == first
    return proc


def _lines(proc: subprocess.Popen[bytes]) -> list[str]:
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    return out.decode().splitlines()


@pytest.mark.skipif(_FLOCK is None or sys.platform != "linux", reason="reads /proc syscall")
def test_a_waiter_on_the_main_thread_sleeps_in_flock_until_the_holder_lets_go(
    wd: Paths,
) -> None:
    holder = _holding(wd)
    waiter = _python(wd, "attempt(); state()")
    seen: list[str] = []

    def blocked() -> bool:
        with open(f"/proc/{waiter.pid}/syscall") as f:
            words = f.read().split()
        if words[:1] == [str(_FLOCK)] and int(words[2], 16) == 2:  # LOCK_EX, no LOCK_NB
            seen.append(" ".join(words[:3]))
        return bool(seen)

    try:
        wait_for(blocked, timeout=30, interval=0.005)  # asleep inside flock, not between tries
    finally:
        _lines(holder)  # lets go
    assert _lines(waiter) == ["epoch 1", "timer 0.0 handler True"]


def test_busy_on_the_main_thread_leaves_no_timer_and_no_handler(wd: Paths) -> None:
    holder = _holding(wd)
    try:
        waiter = _python(
            wd,
            "lease.LOCK_TIMEOUT_S = 0.2\nt0 = time.monotonic(); attempt()\n"
            "print(time.monotonic() - t0 >= 0.2); state()",
        )
        busy, waited, left = _lines(waiter)
        assert busy.startswith("busy the lock of claim repo stayed taken")
        assert waited == "True" and left == "timer 0.0 handler True"
    finally:
        _lines(holder)
    assert claims.claim(wd, "repo", holders.own_holder("me"), now=time.time()).claim.epoch == 1


def test_a_callers_own_alarm_is_left_alone_and_the_wait_polls(wd: Paths) -> None:
    holder = _holding(wd)
    try:
        waiter = _python(
            wd,
            "lease.LOCK_TIMEOUT_S = 0.2\nrang = []\n"
            "signal.signal(signal.SIGALRM, lambda *a: rang.append(1))\n"
            "signal.setitimer(signal.ITIMER_REAL, 30)\nattempt()\n"
            "left = signal.getitimer(signal.ITIMER_REAL)[0]\n"
            "print(25 < left <= 30, signal.getsignal(signal.SIGALRM) is not None, rang)\n"
            "signal.setitimer(signal.ITIMER_REAL, 0)\nattempt()\n"  # their handler, no timer
            "print(signal.getsignal(signal.SIGALRM) != signal.SIG_DFL, rang)",
        )
        first, kept, second, still = _lines(waiter)
        assert first.startswith("busy") and second.startswith("busy")
        assert kept == "True True []" and still == "True []"
    finally:
        _lines(holder)


def test_off_the_main_thread_the_wait_polls_and_times_out(wd: Paths) -> None:
    holder = _holding(wd)
    try:
        waiter = _python(
            wd,
            "lease.LOCK_TIMEOUT_S = 0.2\nt = threading.Thread(target=attempt)\n"
            "t.start(); t.join(); state()",
        )
        busy, left = _lines(waiter)
        assert busy.startswith("busy") and left == "timer 0.0 handler True"
    finally:
        _lines(holder)
