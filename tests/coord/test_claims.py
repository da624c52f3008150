"""Claims across real processes: mutual exclusion, fencing epochs, reaping, fail-closed liveness."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from looop_py import identity, jsonio
from looop_py.beat.pulse import beat
from looop_py.coord import holders, reaper
from looop_py.coord import lease as claims
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.errors import ClaimHeld
from looop_py.loops.store import is_live
from looop_py.sensing import probes
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from looop_py.workdir.shelf import FilesShelf
from looop_py.workdir.template import init
from tests.conftest import open_wd, run_looop, wait_for

PROCS, NAMES, ROUNDS = 32, ("alpha", "beta", "gamma", "delta"), 100


class Noop:
    name = "noop"

    def decide(self, request: DecideRequest) -> Decision:
        return Decision(move={"action": "noop"})


def _ledger(fd: int, line: str) -> None:
    """Append under a lock of the ledger's own, independent of the claims' locks."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _contender(root: str, ledger: str, seed: int) -> None:
    rng = random.Random(seed)
    paths = Paths(Path(root))
    holder = holders.own_holder(f"p{os.getpid()}")
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND)
    order = list(NAMES)
    for _ in range(ROUNDS):
        rng.shuffle(order)
        for name in order:
            tries = 0
            while True:
                try:
                    got = claims.claim(paths, name, holder, now=time.time())
                    break
                except ClaimHeld:  # back off, as a worker would: spinning only burns CPU
                    tries += 1
                    time.sleep(rng.uniform(0, min(0.02, 0.0005 * 2**tries)))
            _ledger(fd, f"acquire {name} {got.claim.epoch} {os.getpid()}")
            _ledger(fd, f"release {name} {got.claim.epoch} {os.getpid()}")
            claims.unclaim(paths, name, holder, now=time.time())
    os.close(fd)


@pytest.fixture
def fast_wd(tmp_path: Path) -> Iterator[Paths]:
    """A work dir on tmpfs when there is one: this test is about exclusion, not disk speed."""
    shm = Path("/dev/shm")
    parent = Path(tempfile.mkdtemp(dir=shm)) if shm.is_dir() else tmp_path
    try:
        yield Paths(init(parent / "wd").root)
    finally:
        if parent != tmp_path:
            shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.slow
def test_contention_one_holder_at_a_time_and_epochs_only_grow(
    fast_wd: Paths, tmp_path: Path
) -> None:
    wd = fast_wd
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    # Load what a claim uses here once, rather than in each forked child.
    warm = holders.own_holder("warm-up")
    claims.claim(wd, "warm-up", warm, now=time.time())
    claims.unclaim(wd, "warm-up", warm, now=time.time())
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_contender, args=(str(wd.root), str(ledger), i)) for i in range(PROCS)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    holder: dict[str, tuple[str, str] | None] = defaultdict(lambda: None)
    last_epoch: dict[str, int] = defaultdict(int)
    acquires = 0
    for line in ledger.read_text().splitlines():
        kind, name, epoch_s, pid = line.split()
        epoch = int(epoch_s)
        if kind == "acquire":
            assert holder[name] is None, f"{name}: {pid} acquired while {holder[name]} held it"
            assert epoch > last_epoch[name], f"{name}: epoch {epoch} after {last_epoch[name]}"
            holder[name], last_epoch[name] = (pid, epoch_s), epoch
            acquires += 1
        else:
            assert holder[name] == (pid, epoch_s), line
            holder[name] = None
    assert acquires == PROCS * len(NAMES) * ROUNDS
    assert all(h is None for h in holder.values())
    assert dict(last_epoch) == dict.fromkeys(NAMES, PROCS * ROUNDS)  # one epoch per holder
    assert list(wd.claims.glob("*.json")) == []


def test_threads_of_one_process_exclude_each_other(wd: Paths) -> None:
    import threading

    inside, overlaps, acquired = [0], [0], [0]

    def run(label: str) -> None:
        holder = holders.own_holder(label)
        for _ in range(50):
            try:
                claims.claim(wd, "shared", holder, now=time.time())
            except ClaimHeld:
                time.sleep(0.0005)
                continue
            inside[0] += 1
            overlaps[0] += inside[0] > 1
            acquired[0] += 1
            time.sleep(0.0002)
            inside[0] -= 1
            claims.unclaim(wd, "shared", holder, now=time.time())

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps[0] == 0 and acquired[0] > 10


def test_owner_reclaim_is_idempotent_and_others_are_refused(wd: Paths) -> None:
    me = holders.own_holder("me")
    first = claims.claim(wd, "repo", me, now=100.0)
    again = claims.claim(wd, "repo", me, now=101.0)
    assert (first.action, again.action) == ("acquired", "held")
    assert again.claim == first.claim and first.claim.epoch == 1
    other = holders.Holder("other", me.pid, me.create_time)  # another session label
    with pytest.raises(ClaimHeld, match="held by session me") as info:
        claims.claim(wd, "repo", other, now=102.0)
    assert info.value.exit_code == 4
    with pytest.raises(ClaimHeld):
        claims.unclaim(wd, "repo", other, now=102.0)
    assert claims.unclaim(wd, "repo", me, now=103.0) == first.claim
    assert claims.unclaim(wd, "repo", me, now=104.0) is None  # idempotent
    # The epoch survives the release: the next holder gets 2, never 1 again.
    assert claims.claim(wd, "repo", other, now=105.0).claim.epoch == 2


def test_ttl_expires_without_renew_and_renew_extends(wd: Paths) -> None:
    me, other = holders.own_holder("me"), holders.own_holder("other")
    claims.claim(wd, "deploy", me, ttl_s=10, now=1000.0)
    renewed = claims.claim(wd, "deploy", me, renew=True, now=1008.0)
    assert renewed.action == "renewed" and renewed.claim.expires_at == 1018.0
    with pytest.raises(ClaimHeld):
        claims.claim(wd, "deploy", other, now=1015.0)  # still within the renewed ttl
    assert reaper.reap(wd, 1017.0, partial(is_live, FilesShelf(wd))) == []
    events = reaper.reap(wd, 1019.0, partial(is_live, FilesShelf(wd)))
    assert events == [
        {
            "event": "claim_reaped",
            "name": "deploy",
            "reason": "expired",
            "session": "me",
            "pid": me.pid,
            "epoch": 1,
        }
    ]
    assert claims.claim(wd, "deploy", other, now=1020.0).claim.epoch == 2


def test_recycled_pid_is_dead(wd: Paths) -> None:
    me = holders.own_holder("me")
    assert identity.is_alive(me.pid, me.create_time)
    ghost = holders.Holder("ghost", me.pid, me.create_time - 500)  # same pid, older process
    assert not identity.is_alive(ghost.pid, ghost.create_time)
    claims.claim(wd, "repo", ghost, now=time.time())
    assert [v.live for v in reaper.list_claims(wd, time.time())] == [False]
    assert (
        probes.claims(probes.Seen(open_wd(wd), time.time(), ()))["signal"] == []
    )  # only the live set
    taken = claims.claim(wd, "repo", me, now=time.time())
    assert taken.action == "acquired" and taken.claim.epoch == 2


@pytest.mark.parametrize("via_proc", [True, False])
def test_liveness_errors_count_as_alive(
    wd: Paths, monkeypatch: pytest.MonkeyPatch, via_proc: bool
) -> None:
    import psutil

    me = holders.own_holder("me")
    claims.claim(wd, "repo", holders.Holder("x", me.pid, me.create_time - 500), now=time.time())
    assert reaper.reap(wd, time.time(), partial(is_live, FilesShelf(wd)))  # really dead: reaped
    claims.claim(wd, "repo", holders.Holder("x", me.pid, me.create_time - 500), now=time.time())
    if via_proc:  # /proc cannot be read
        real_open = os.open

        def denied(path: Any, *a: Any, **kw: Any) -> Any:
            if str(path).startswith("/proc/"):
                raise PermissionError(path)
            return real_open(path, *a, **kw)

        monkeypatch.setattr(os, "open", denied)
    else:  # psutil cannot look

        class Denied:
            def __init__(self, pid: int) -> None:
                raise psutil.AccessDenied(pid)

        monkeypatch.setattr(identity, "_PROC", False)
        monkeypatch.setattr(psutil, "Process", Denied)
    assert identity.is_alive(me.pid, me.create_time - 500)
    assert reaper.reap(wd, time.time(), partial(is_live, FilesShelf(wd))) == []
    with pytest.raises(ClaimHeld):
        claims.claim(wd, "repo", me, now=time.time())


def test_sigkilled_holder_loses_its_claim_on_the_next_beat(wd: Paths) -> None:
    # A shell takes the claim through the real CLI, then sleeps; the claim follows the shell.
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_SESSION_ID"}
    script = f'{sessions_bin()} -C "{wd.root}" claim repo > "{wd.root}/epoch" && sleep 30'
    holder = subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True)
    try:
        epoch = wd.root / "epoch"
        wait_for(lambda: epoch.exists() and epoch.read_text().strip(), what="the claim")
        assert (wd.root / "epoch").read_text().strip() == "1"
        assert probes.claims(probes.Seen(open_wd(wd), time.time(), ()))["signal"] == [
            {"name": "repo", "session": None}
        ]
        refused = run_looop("-C", str(wd.root), "claim", "repo")
        assert refused.returncode == 4 and f"pid {holder.pid}" in refused.stderr
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    assert claims_on_disk(wd) == ["repo"]
    beat(open_wd(wd), decider=Noop())
    assert claims_on_disk(wd) == []
    reaped = [e for e in journal.recent_events(wd) if e["event"] == "claim_reaped"]
    assert reaped and reaped[0]["name"] == "repo" and reaped[0]["reason"] == "holder-dead"
    again = run_looop("-C", str(wd.root), "claim", "repo")
    assert again.returncode == 0 and again.stdout.strip() == "2"


def test_a_rounds_claim_lives_as_long_as_its_round(wd: Paths) -> None:
    from looop_py.beat.pulse import housekeep

    claims.claim(wd, "repo", holders.round_holder("r1"), now=time.time())
    wd.rounds.mkdir(exist_ok=True)
    (wd.rounds / "r1.json").write_text("{not json")  # cannot tell: fail closed, kept
    assert reaper.reap(wd, time.time(), partial(is_live, FilesShelf(wd))) == []
    jsonio.write_json(wd.rounds / "r1.json", {"phase": "work"})
    assert reaper.reap(wd, time.time(), partial(is_live, FilesShelf(wd))) == []
    jsonio.write_json(wd.rounds / "r1.json", {"phase": "done"})
    housekeep(open_wd(wd), time.time())  # the beat's step
    assert claims_on_disk(wd) == []
    reaped = [e for e in journal.recent_events(wd) if e["event"] == "claim_reaped"]
    assert [(e["name"], e["reason"]) for e in reaped] == [("repo", "round-ended")]


def test_cli_claim_prints_the_epoch_and_lists(wd: Paths) -> None:
    r = run_looop("-C", str(wd.root), "claim", "docs", "--ttl", "60", "--json")
    assert r.returncode == 0, r.stderr
    body: dict[str, Any] = jsonio.loads(r.stdout)
    assert body["epoch"] == 1 and body["action"] == "acquired" and body["expires_at"]
    listed = jsonio.loads(run_looop("-C", str(wd.root), "claims", "--json").stdout)
    # The caller (this test process) is the holder and is alive.
    assert [(c["name"], c["live"], c["pid"]) for c in listed["claims"]] == [
        ("docs", True, os.getpid())
    ]
    assert run_looop("-C", str(wd.root), "unclaim", "docs").returncode == 0
    assert claims_on_disk(wd) == []


def sessions_bin() -> str:
    from looop_py.workdir.environ import looop_bin

    return looop_bin()


def claims_on_disk(wd: Paths) -> list[str]:
    return sorted(p.stem for p in wd.claims.glob("*.json"))
