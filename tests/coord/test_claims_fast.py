"""Claims at lock speed: the epoch lives in the lock file, a release only unlinks, and the
plain `looop claim` door loads neither click nor psutil."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from looop_py import identity, jsonio
from looop_py.cli import plainclaim
from looop_py.coord import holders
from looop_py.coord import lease as claims
from looop_py.errors import ClaimHeld
from looop_py.workdir.paths import Paths
from tests.cli.test_process import _loaded_after_plain_pulse
from tests.conftest import run_looop, wait_for


def test_release_unlinks_and_the_lock_file_keeps_the_epoch(wd: Paths) -> None:
    me = holders.own_holder("me")
    for expected in (1, 2, 3):
        assert claims.claim(wd, "repo", me, now=time.time()).claim.epoch == expected
        assert os.path.isfile(claims.claim_path(wd, "repo"))
        claims.unclaim(wd, "repo", me, now=time.time())
        assert not os.path.exists(claims.claim_path(wd, "repo"))
        assert os.listdir(wd.claims) == [claims.LOCKS]  # nothing renamed on release
        assert (wd.claims / claims.LOCKS / "repo.lock").read_bytes()[
            :32
        ].strip() == b"%d" % expected


def test_the_lock_times_out_as_busy(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    from looop_py.errors import Busy

    monkeypatch.setattr(claims, "LOCK_TIMEOUT_S", 0.2)
    with claims.locked(wd, "repo"):
        # Another open file description: excluded although it is the same process.
        t0 = time.monotonic()
        with pytest.raises(Busy, match="stayed taken"), claims.locked(wd, "repo"):
            pass
        assert time.monotonic() - t0 >= 0.2


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["x"], {"name": "x", "session": None, "pid": None, "as_json": False, "ttl": None}),
        (["x", "--ttl", "5", "--renew", "--json"], {"ttl": 5.0, "renew": True, "as_json": True}),
        (["x", "--ttl=5", "--session=s1", "--pid", "7"], {"ttl": 5.0, "session": "s1", "pid": 7}),
    ],
)
def test_plain_claim_lines_parse(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], parsed: dict[str, object]
) -> None:
    monkeypatch.delenv("LOOOP_SESSION_ID", raising=False)
    opts = plainclaim.parse_plain("claim", argv)
    assert opts is not None and opts.items() >= parsed.items()


@pytest.mark.parametrize(
    ("verb", "argv"),
    [
        ("claim", ["--help"]),
        ("claim", []),
        ("claim", ["x", "--ttl"]),
        ("claim", ["x", "--ttl", "soon"]),
        ("claim", ["x", "--bogus"]),
        ("claim", ["x", "y"]),
        ("unclaim", ["x", "--ttl", "5"]),  # unclaim has no --ttl: click says so
        ("unclaim", ["x", "--renew"]),
    ],
)
def test_anything_else_goes_to_click(verb: str, argv: list[str]) -> None:
    assert plainclaim.parse_plain(verb, argv) is None


def test_plain_claim_loads_neither_click_nor_psutil(wd: Paths) -> None:
    heavy = ("click", "looop_py.cli.app", "psutil", "looop_py.workers.records")
    for args in (["claim", "repo"], ["claim", "repo", "--json"], ["unclaim", "repo"]):
        out = _loaded_after_plain_pulse(wd, args, heavy)
        assert "HEAVY []" in out, (args, out)
    assert not (wd.claims / "repo.json").exists()  # the unclaim ran: the door did the work


def test_both_doors_agree(wd: Paths) -> None:
    fast = run_looop("-C", str(wd.root), "claim", "repo", "--ttl", "60", "--json")
    slow = run_looop("-C", str(wd.root), "claim", "repo", "--ttl", "60", "--json", "--pid=bad")
    assert fast.returncode == 0 and jsonio.loads(fast.stdout)["action"] == "acquired"
    assert slow.returncode == 2 and "bad" in slow.stdout + slow.stderr  # click's usage error
    again = run_looop("-C", str(wd.root), "claim", "repo", "--json")
    assert jsonio.loads(again.stdout)["action"] == "held"
    gone = run_looop("-C", str(wd.root), "unclaim", "repo")
    assert (gone.returncode, gone.stderr) == (0, "")
    none = run_looop("-C", str(wd.root), "unclaim", "repo")
    assert none.returncode == 0 and "repo was not claimed" in none.stderr
    missing = run_looop("-C", str(wd.root / "nope"), "claim", "repo", "--json")
    assert missing.returncode == 2 and "error" in jsonio.loads(missing.stdout)


def test_lasting_ancestor_reads_proc_as_psutil_would() -> None:
    # bash -c '( ( sleep ) )': the inner subshells are forked copies of the outer bash.
    script = "( ( sleep 5; true ); true ); true"
    outer = subprocess.Popen(["bash", "-c", script])
    try:

        def sleeper() -> psutil.Process | None:
            kids = psutil.Process(outer.pid).children(recursive=True)
            return next((k for k in kids if k.name() == "sleep"), None)

        wait_for(sleeper, 10, "the inner sleep")
        found = sleeper()
        assert found is not None
        copy = found.ppid()
        assert copy != outer.pid  # a forked copy between the sleep and the script
        assert identity.lasting_ancestor(copy) == outer.pid
        assert identity._lasting_ancestor_proc(copy) == outer.pid
        assert identity.lasting_ancestor(os.getpid()) == os.getpid()
        assert identity.lasting_ancestor(2**22 + 12345) == 2**22 + 12345  # no such process
    finally:
        outer.kill()
        outer.wait()
    assert sys.platform != "linux" or identity._PROC


# -- the lean read and the O_EXCL fast path meet hostile claim files ---------------------------


def _hostile(wd: Paths, kind: str) -> str:
    path = claims.claim_path(wd, "repo")
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a blocking open or read would hang the claim
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "device":
        os.symlink("/dev/zero", path)  # endless bytes: a read without a cap never ends
    elif kind == "empty":  # a creator that died between its O_EXCL open and its write
        open(path, "wb").close()
    elif kind == "not-json":
        with open(path, "wb") as f:
            f.write(b"{" * 70_000)  # past any small first read, and not JSON
    return path


@pytest.mark.parametrize("kind", ["fifo", "directory", "device", "empty", "not-json"])
def test_an_unreadable_claim_file_is_never_taken_over(wd: Paths, kind: str) -> None:
    from looop_py.errors import CorruptFile

    _hostile(wd, kind)
    me = holders.own_holder("me")
    with pytest.raises(CorruptFile, match="unreadable"):
        claims.claim(wd, "repo", me, now=time.time())
    with pytest.raises(CorruptFile, match="unreadable"):
        claims.claim(wd, "repo", me, renew=True, now=time.time())
    assert not (wd.claims / claims.LOCKS / "repo.lock").read_bytes().strip()  # no epoch spent


def test_a_padded_claim_file_past_a_small_read_still_names_its_live_holder(wd: Paths) -> None:
    from looop_py.errors import ClaimHeld

    me, other = holders.own_holder("me"), holders.own_holder("other")
    claims.claim(wd, "repo", me, now=time.time())
    path = claims.claim_path(wd, "repo")
    body = open(path, "rb").read()
    with open(path, "wb") as f:  # valid JSON, but longer than one small read
        f.write(body.rstrip() + b" " * 100_000 + b"\n")
    with pytest.raises(ClaimHeld, match="session me"):
        claims.claim(wd, "repo", other, now=time.time())
    with pytest.raises(ClaimHeld, match="not by you"):
        claims.unclaim(wd, "repo", other, now=time.time())
    released = claims.unclaim(wd, "repo", me, now=time.time())
    assert released is not None and released.epoch == 1


def test_a_refused_claim_spends_no_epoch(wd: Paths) -> None:
    from looop_py.errors import ClaimHeld

    me, other = holders.own_holder("me"), holders.own_holder("other")
    assert claims.claim(wd, "repo", me, now=time.time()).claim.epoch == 1
    for _ in range(3):
        with pytest.raises(ClaimHeld):
            claims.claim(wd, "repo", other, now=time.time())
    assert claims.claim(wd, "repo", me, now=time.time()).action == "held"
    claims.unclaim(wd, "repo", me, now=time.time())
    assert claims.claim(wd, "repo", other, now=time.time()).claim.epoch == 2


def _take_over(root: str, out: str, seed: int, start: Any, done: Any) -> None:
    me = holders.own_holder(f"c{seed}")
    start.wait(60)  # all at once: each one finds the ghost's claim before anyone replaced it
    try:
        got = claims.claim(Paths(root), "repo", me, now=time.time())
        line = f"{got.action} {got.claim.epoch} {os.getpid()}\n"
    except ClaimHeld as exc:
        line = f"refused {exc} {os.getpid()}\n".replace("\n", " ").rstrip() + "\n"
    fd = os.open(out, os.O_WRONLY | os.O_APPEND)
    os.write(fd, line.encode())
    os.close(fd)
    done.wait(60)  # a winner that exits dies, and its claim with it: stay until all have tried


def test_many_racing_for_a_dead_holders_claim_one_wins_with_the_next_epoch(
    wd: Paths, tmp_path: Path
) -> None:
    """A contender checks a holder's liveness without the lock, then takes the lock again
    to take a dead holder's claim over: exactly one of many wins, and the rest are refused
    naming the winner, never the ghost."""
    me = holders.own_holder("me")
    ghost = holders.Holder("ghost", me.pid, (me.create_time or 0) - 500)  # a recycled pid
    assert claims.claim(wd, "repo", ghost, now=time.time()).claim.epoch == 1
    out = tmp_path / "outcomes.txt"
    out.touch()
    ctx = multiprocessing.get_context("fork")
    start, done = ctx.Barrier(12), ctx.Event()
    procs = [
        ctx.Process(target=_take_over, args=(str(wd.root), str(out), i, start, done))
        for i in range(12)
    ]
    for p in procs:
        p.start()
    try:
        wait_for(lambda: len(out.read_text().splitlines()) == 12, timeout=60)
        cur, _ = claims.read_claim(claims.claim_path(wd, "repo"))  # while every contender lives
    finally:
        done.set()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 12
    won = [line for line in lines if line.startswith("acquired ")]
    assert len(won) == 1 and won[0].split()[1] == "2", lines
    winner = won[0].split()[2]
    refused = [line for line in lines if line.startswith("refused ")]
    assert len(refused) == 11 and all("session c" in r and "ghost" not in r for r in refused)
    assert cur is not None and str(cur.pid) == winner and cur.epoch == 2
