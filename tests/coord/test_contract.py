"""The coordination contract, the same tests on both backends: files and a real etcd.

Exclusivity under contention from many processes, epochs that only grow (by exactly one
on files; on etcd the claim key's create revision),
holder death → release within the lease TTL, fenced writes refused for a stale
token, and one pulse at a time from two "hosts" (processes with different host ids;
on etcd, two work dirs sharing one prefix).
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome
from looop_py.coord import choose, holders
from looop_py.coord.base import HOST_ENV
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.errors import ClaimHeld
from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init
from tests.conftest import close_opened, open_wd, wait_for, write_sensor
from tests.etcdserver import Cluster, use_etcd

TTL = 2.0  # the etcd lease TTL these tests use (the shortest looop.toml allows)


class Noop:
    name = "noop"

    def decide(self, request: DecideRequest) -> Decision:
        return Decision(move={"action": "noop"})


@pytest.fixture(scope="module")
def etcd() -> Iterator[Cluster]:
    root = Path(
        tempfile.mkdtemp(
            prefix="looop-etcd-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
        )
    )
    cluster = Cluster(root).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


class Backend:
    """Work dirs on one backend: on files they are one dir, on etcd many dirs on one prefix."""

    def __init__(self, name: str, tmp: Path, cluster: Cluster | None) -> None:
        self.name = name
        self.tmp = tmp
        self.cluster = cluster
        self.prefix = f"/looop/test-{uuid.uuid4().hex[:10]}"
        self._dirs: dict[int, Paths] = {}

    def workdir(self, host: int = 0) -> Paths:
        key = 0 if self.name == "files" else host
        if key not in self._dirs:
            root = init(self.tmp / f"wd{key}").root
            for script in (root / "sensors").glob("*.sh"):
                script.unlink()
            (root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
            if self.cluster is not None:
                use_etcd(root / "looop.toml", self.cluster.endpoints, self.prefix, TTL)
            self._dirs[key] = Paths(root)
        return self._dirs[key]

    @property
    def release_within_s(self) -> float:
        """Holder death → free: at once on files (the next claimant looks), else the lease TTL."""
        return 1.0 if self.name == "files" else TTL + 1.0  # etcd checks expiry every ~0.5 s


@pytest.fixture(params=["files", pytest.param("etcd", marks=pytest.mark.etcd)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    cluster = request.getfixturevalue("etcd") if request.param == "etcd" else None
    yield Backend(request.param, tmp_path, cluster)
    close_opened()


def _ledger(fd: int, line: str) -> None:
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _contender(root: str, ledger: str, seed: int, attempts: int, names: tuple[str, ...]) -> None:
    rng = random.Random(seed)
    coord = choose.coordinator(open_wd(Paths(Path(root))))
    holder = holders.own_holder(f"p{os.getpid()}")
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND)
    for _ in range(attempts):
        name = rng.choice(names)
        try:
            got = coord.claim(name, holder, now=time.time())
        except ClaimHeld:
            _ledger(fd, f"refused {name} 0 {os.getpid()}")
            time.sleep(rng.uniform(0, 0.004))
            continue
        _ledger(fd, f"acquire {name} {got.claim.epoch} {os.getpid()}")
        time.sleep(rng.uniform(0, 0.002))  # inside: a second holder would show here
        _ledger(fd, f"release {name} {got.claim.epoch} {os.getpid()}")
        coord.unclaim(name, holder, now=time.time())
    os.close(fd)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_exclusive_under_contention_and_epochs_grow_by_one(
    backend: Backend, tmp_path: Path
) -> None:
    procs, attempts, names = 8, 250, ("alpha", "beta")  # 2,000 contended attempts
    wd = backend.workdir()
    ledger = tmp_path / "ledger.txt"
    ledger.touch()
    choose.coordinator(open_wd(wd))  # import the backend here once, not in each forked child
    ctx = multiprocessing.get_context("fork")
    workers = [
        ctx.Process(target=_contender, args=(str(wd.root), str(ledger), i, attempts, names))
        for i in range(procs)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=200)
        assert w.exitcode == 0
    holder: dict[str, str | None] = defaultdict(lambda: None)
    last: dict[str, int] = defaultdict(int)
    grants = refused = doubles = 0
    for line in ledger.read_text().splitlines():
        kind, name, epoch_s, pid = line.split()
        epoch = int(epoch_s)
        if kind == "refused":
            refused += 1
        elif kind == "acquire":
            doubles += holder[name] is not None
            # files: a counter, +1 per holder; etcd: the claim key's create revision.
            grew = epoch == last[name] + 1 if backend.name == "files" else epoch > last[name]
            assert grew, f"{name}: epoch {epoch} after {last[name]}"
            holder[name], last[name] = pid, epoch
            grants += 1
        else:
            assert holder[name] == pid, line
            holder[name] = None
    assert doubles == 0
    assert grants + refused == procs * attempts
    assert refused > 0 and grants > 100  # contended, and progress was made
    print(f"{backend.name}: {grants} grants, {refused} refused, 0 double grants")
    views = choose.coordinator(open_wd(wd)).list_claims(time.time())
    assert [v.name for v in views if v.live] == []


def test_tokens_strictly_increase_and_never_go_back(backend: Backend) -> None:
    coord = choose.coordinator(open_wd(backend.workdir()))
    me, other = holders.own_holder("me"), holders.own_holder("other")
    seen = []
    for who in (me, other, me, other):
        got = coord.claim("repo", who, now=time.time())
        assert got.action == "acquired"
        assert coord.claim("repo", who, now=time.time()).action == "held"  # harmless again
        with pytest.raises(ClaimHeld):
            coord.claim("repo", other if who is me else me, now=time.time())
        seen.append(got.claim.epoch)
        assert coord.unclaim("repo", who, now=time.time()) == got.claim
        assert coord.unclaim("repo", who, now=time.time()) is None
    if backend.name == "files":
        assert seen == [1, 2, 3, 4]  # a counter beside the claim
    else:  # the claim key's create revision: etcd's own, growing
        assert seen == sorted(set(seen)) and seen[0] > 0
        assert not coord.client.get(coord.key("epochs", ""), prefix=True)  # no counter keys
    assert coord.get("repo", time.time()) is None


HOLD = """
import os, sys, time
sys.path[:0] = [{path!r}]
from pathlib import Path
from looop_py.coord import holders
from looop_py.coord.choose import coordinator, open_workdir
from looop_py.workdir.paths import Paths
coord = coordinator(open_workdir(Paths(Path({root!r}))))
got = coord.claim({name!r}, holders.own_holder("doomed"), now=time.time())
print(got.claim.epoch, flush=True)
time.sleep(120)
"""


def _holder(wd: Paths, name: str, host: str = "") -> tuple[subprocess.Popen[str], int]:
    code = HOLD.format(path=str(Path(__file__).parents[2]), root=str(wd.root), name=name)
    env = {**os.environ, HOST_ENV: host} if host else None
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_holder_death_releases_within_the_ttl(backend: Backend) -> None:
    _death_then_release(backend, "this-host")


@pytest.mark.etcd
def test_a_dead_hosts_claim_goes_when_its_lease_expires(etcd: Cluster, tmp_path: Path) -> None:
    try:
        _death_then_release(Backend("etcd", tmp_path, etcd), "other-host")
    finally:
        close_opened()


def _death_then_release(backend: Backend, where: str) -> None:
    wd = backend.workdir()
    # On this host a claimant sees the dead process at once; from another host only the
    # lease can tell, so the claim goes when its TTL runs out.
    proc, epoch = _holder(wd, "repo", "far-away" if where == "other-host" else "")
    coord = choose.coordinator(open_wd(wd))
    me = holders.own_holder("next")
    with pytest.raises(ClaimHeld, match="doomed"):
        coord.claim("repo", me, now=time.time())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = time.monotonic()
    got = _claim_when_free(coord, "repo", me, backend.release_within_s + 5, 0.05)
    waited = time.monotonic() - killed
    print(f"{backend.name} ({where}): holder death -> claim free in {waited:.2f} s")
    assert waited <= backend.release_within_s
    assert got.claim.epoch > epoch


def _claim_when_free(coord: Any, name: str, holder: Any, timeout: float, interval: float) -> Any:
    """Try to claim `name` until it is free; fail the test if it is not within `timeout`."""
    got: list[Any] = []

    def claimed() -> bool:
        try:
            got.append(coord.claim(name, holder, now=time.time()))
        except ClaimHeld:
            return False
        return True

    wait_for(claimed, timeout, f"{name} to be released", interval=interval)
    return got[0]


def test_a_stale_token_writes_nothing(backend: Backend) -> None:
    coord = choose.coordinator(open_wd(backend.workdir()))
    a, b = holders.own_holder("a"), holders.own_holder("b")
    first = coord.claim("deploy", a, now=time.time()).claim.epoch
    assert coord.fenced_put("deploy", first, "deploy/state", b"one")
    assert not coord.fenced_put("deploy", first + 1, "deploy/state", b"future")  # not yet
    coord.unclaim("deploy", a, now=time.time())
    assert not coord.fenced_put("deploy", first, "deploy/state", b"released")  # nobody holds
    second = coord.claim("deploy", b, now=time.time()).claim.epoch
    assert not coord.fenced_put("deploy", first, "deploy/state", b"stale")
    assert coord.read("deploy/state") == b"one"
    assert coord.fenced_put("deploy", second, "deploy/state", b"two")
    assert coord.read("deploy/state") == b"two"
    assert coord.read("deploy/nothing") is None


@pytest.mark.etcd
def test_a_paused_holder_past_its_ttl_writes_nothing(etcd: Cluster, tmp_path: Path) -> None:
    backend = Backend("etcd", tmp_path, etcd)
    wd = backend.workdir()
    proc, epoch = _holder(wd, "deploy")
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # paused: its lease keeper thread stops too
        coord = choose.coordinator(open_wd(wd))
        me = holders.own_holder("next")
        got = _claim_when_free(coord, "deploy", me, TTL + 5, 0.1)
        assert got.claim.epoch > epoch
        os.kill(proc.pid, signal.SIGCONT)
        # The old holder wakes up believing it holds `epoch`: its write is refused.
        assert not coord.fenced_put("deploy", epoch, "deploy/state", b"from the past")
        assert coord.fenced_put("deploy", got.claim.epoch, "deploy/state", b"now")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        close_opened()


def _pulse_host(root: str, host: str, attempts: int, out: str) -> None:
    os.environ[HOST_ENV] = host
    outcomes: dict[str, int] = defaultdict(int)
    for _ in range(attempts):
        result = beat(open_wd(Paths(Path(root))), force=True, decider=Noop())
        outcomes[result.outcome.value] += 1
        time.sleep(random.uniform(0, 0.01))
    Path(out).write_text(" ".join(f"{k}={v}" for k, v in sorted(outcomes.items())))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_pulse_at_a_time_across_two_hosts(backend: Backend, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    sensor = (
        f'mkdir "{shared}/inside" 2>/dev/null || echo DOUBLE >> "{shared}/ledger"\n'
        f'echo "run $LOOOP_HOST_ID" >> "{shared}/ledger"\n'
        "sleep 0.03\n"
        f'rmdir "{shared}/inside"\necho 1\n'
    )
    roots = []
    for host in (0, 1):
        wd = backend.workdir(host)
        write_sensor(wd, "overlap", sensor)
        roots.append(str(wd.root))
    choose.coordinator(open_wd(backend.workdir(0)))  # load the backend once, before forking
    ctx = multiprocessing.get_context("fork")
    attempts = 110  # per host: 220 contended attempts in all
    procs = [
        ctx.Process(
            target=_pulse_host,
            args=(roots[i], f"host-{i}", attempts, str(tmp_path / f"out{i}")),
        )
        for i in (0, 1)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=280)
        assert p.exitcode == 0
    ledger = (shared / "ledger").read_text().splitlines()
    runs = [line for line in ledger if line.startswith("run")]
    outcomes = [(tmp_path / f"out{i}").read_text() for i in (0, 1)]
    print(f"{backend.name}: {len(runs)} beats ran, outcomes {outcomes}")
    assert "DOUBLE" not in ledger
    beaten = {line.split()[1] for line in runs}
    if backend.name == "etcd":  # the pulse sticks to the host that took it; the other stands by
        assert len(beaten) == 1 and len(runs) == attempts, beaten
    else:  # the flock is taken per beat: both get turns
        assert beaten == {"host-0", "host-1"}
    assert all("locked=" in o for o in outcomes) or len(runs) < 2 * attempts  # contended


@pytest.mark.slow
def test_a_killed_pulse_holder_is_replaced_within_the_ttl(backend: Backend, tmp_path: Path) -> None:
    a, b = backend.workdir(0), backend.workdir(1)
    started = tmp_path / "started"
    slow = f'[ "$LOOOP_HOST_ID" = host-a ] && {{ echo $$ > "{started}"; sleep 60; }}; echo 1'
    write_sensor(a, "slow", slow)  # on files, host b beats in this same work dir
    env = {**os.environ, HOST_ENV: "host-a"}
    holder = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(a.root), "pulse", "--force"],
        env=env,
        start_new_session=True,
    )
    try:
        wait_for(lambda: started.exists() or holder.poll() is not None, 30, "the slow sensor")
        assert started.exists(), "the holder ended before its slow sensor started"
        os.environ[HOST_ENV] = "host-b"
        try:
            assert beat(open_wd(b), decider=Noop()).outcome is BeatOutcome.LOCKED
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
            killed = time.monotonic()
            results = []

            def beat_ran() -> bool:
                results.append(beat(open_wd(b), decider=Noop()))
                return results[-1].outcome is not BeatOutcome.LOCKED

            wait_for(beat_ran, backend.release_within_s + 5, "a beat on b", interval=0.05)
            result = results[-1]
        finally:
            del os.environ[HOST_ENV]
        waited = time.monotonic() - killed
        print(f"{backend.name}: pulse holder killed -> next beat ran after {waited:.2f} s")
        assert result.outcome is not BeatOutcome.LOCKED
        assert waited <= backend.release_within_s
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait()
        # The sensor runs in a group of its own, which a SIGKILLed pulse cannot end.
        with contextlib.suppress(ProcessLookupError, ValueError, FileNotFoundError):
            os.killpg(int(started.read_text()), signal.SIGKILL)


def test_renew_never_retakes_a_lapsed_or_foreign_lease(backend: Backend) -> None:
    coord = choose.coordinator(open_wd(backend.workdir()))
    me, other = holders.own_holder("me"), holders.own_holder("other")
    now = time.time()
    first = coord.claim("deploy", me, ttl_s=5, now=now)
    renewed = coord.claim("deploy", me, ttl_s=5, renew=True, now=now + 1)
    assert renewed.action == "renewed" and renewed.claim.epoch == first.claim.epoch
    with pytest.raises(ClaimHeld, match="cannot renew deploy: its ttl ran out"):
        coord.claim("deploy", me, renew=True, now=now + 60)  # lapsed: refused, not re-taken
    with pytest.raises(ClaimHeld, match="cannot renew fresh: nobody holds it"):
        coord.claim("fresh", me, renew=True, now=now)
    coord.claim("theirs", other, now=now)
    with pytest.raises(ClaimHeld, match="theirs is held by"):
        coord.claim("theirs", me, renew=True, now=now)
    again = coord.claim("deploy", me, ttl_s=5, now=now + 60)  # a plain claim takes it anew
    assert again.action == "acquired"
    # files count epochs; etcd's token is the key's create revision: newer, not next.
    if backend.name == "files":
        assert again.claim.epoch == first.claim.epoch + 1
    else:
        assert again.claim.epoch > first.claim.epoch
