"""Claims on the files backend beside etcd: throughput, and how soon a dead holder's claim goes.

    python bench/coord.py [PROCS] [CYCLES] [--ttl S] [--dir DIR]

Starts Debian's `etcd` on free loopback ports (data in a temp dir; stopped by PID).
For each backend:

1. PROCS processes (default 8) each claim and release random names of 4, CYCLES
   times (default 100), backing off when a name is taken, through the
   coordination interface (`looop_py.coord`): claim+release cycles per second.
2. One process, no contention: cycles per second.
3. A holder process is SIGKILLed; another claimant retries every 10 ms until it
   gets the claim: the time from the kill to the grant. On etcd, twice: from the
   same host (the claimant sees the dead process) and from another host id (only
   the lease can tell: up to its TTL).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.etcdserver starts etcd

from looop_py.coord import choose, holders
from looop_py.coord.base import HOST_ENV
from looop_py.coord.choose import open_workdir
from looop_py.errors import ClaimHeld
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init
from tests.etcdserver import Cluster, use_etcd

ROOT = Path(__file__).resolve().parents[1]
NAMES = ("alpha", "beta", "gamma", "delta")


def contender(root: str, cycles: int, seed: int, refused: multiprocessing.Value) -> None:  # type: ignore[valid-type]
    rng = random.Random(seed)
    wd = open_workdir(Paths(Path(root)))  # a forked child opens its own (its own etcd lease)
    try:
        coord = choose.coordinator(wd)
        holder = holders.own_holder(f"p{os.getpid()}")
        misses = 0
        for _ in range(cycles):
            name = rng.choice(NAMES)
            tries = 0
            while True:
                try:
                    coord.claim(name, holder, now=time.time())
                    break
                except ClaimHeld:
                    tries += 1
                    time.sleep(rng.uniform(0, min(0.02, 0.0005 * 2**tries)))
            misses += tries
            coord.unclaim(name, holder, now=time.time())
    finally:
        wd.close()
    with refused.get_lock():
        refused.value += misses


def throughput(wd: WorkDir, procs: int, cycles: int) -> tuple[float, int, float]:
    coord = choose.coordinator(wd)  # the backend loaded once, before forking
    root = wd.paths.root
    ctx = multiprocessing.get_context("fork")
    refused = ctx.Value("q", 0)
    workers = [
        ctx.Process(target=contender, args=(str(root), cycles, i, refused)) for i in range(procs)
    ]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    contended = procs * cycles / (time.perf_counter() - start)
    me = holders.own_holder("solo")
    n = 300
    start = time.perf_counter()
    for _ in range(n):
        coord.claim("solo", me, now=time.time())
        coord.unclaim("solo", me, now=time.time())
    return contended, refused.value, n / (time.perf_counter() - start)


HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from looop_py.coord import holders\n"
    "from looop_py.coord.choose import coordinator, open_workdir\n"
    "from looop_py.workdir.paths import Paths\n"
    "c = coordinator(open_workdir(Paths(Path(sys.argv[1]))))\n"
    "c.claim(sys.argv[2], holders.own_holder('doomed'), now=time.time())\n"
    "print('held', flush=True)\n"
    "time.sleep(300)\n"
)


def death_to_release(wd: WorkDir, name: str, host: str | None) -> float:
    root = wd.paths.root
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if host:
        env[HOST_ENV] = host
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root), name], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    coord = choose.coordinator(wd)
    me = holders.own_holder("next")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed = time.perf_counter()
    while True:
        try:
            coord.claim(name, me, now=time.time())
            break
        except ClaimHeld:
            time.sleep(0.01)
    waited = time.perf_counter() - killed
    coord.unclaim(name, me, now=time.time())
    return waited


def workdir(parent: Path, name: str) -> Path:
    root = init(parent / name).root
    for script in (root / "sensors").glob("*.sh"):
        script.unlink()
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("procs", nargs="?", type=int, default=8)
    ap.add_argument("cycles", nargs="?", type=int, default=100)
    ap.add_argument("--ttl", type=float, default=2.0, help="etcd lease TTL, s")
    ap.add_argument("--runs", type=int, default=3, help="holder deaths per case")
    ap.add_argument("--dir", default=None, help="parent dir of the work dirs")
    args = ap.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="looop-bench-coord-", dir=args.dir))
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="looop-bench-etcd-", dir=shm))).start()
    print(f"{os.cpu_count()} CPUs; work dirs under {parent.parent}; etcd data on {shm or 'disk'}")
    opened: list[WorkDir] = []  # each work dir opened once, here, and closed at the end
    try:
        files_root = workdir(parent, "files")
        etcd_root = workdir(parent, "etcd")
        use_etcd(etcd_root / "looop.toml", cluster.endpoints, "/looop/bench", args.ttl)
        files_wd = open_workdir(Paths(files_root))
        opened.append(files_wd)
        etcd_wd = open_workdir(Paths(etcd_root))
        opened.append(etcd_wd)
        for label, wd in (("files", files_wd), ("etcd", etcd_wd)):
            contended, refused, solo = throughput(wd, args.procs, args.cycles)
            print(
                f"{label:>5}: {contended:,.0f} claim+release cycles/s with {args.procs} processes "
                f"on {len(NAMES)} names ({refused:,} refused attempts retried); "
                f"{solo:,.0f}/s uncontended"
            )
        cases = [
            ("files", files_wd, None),
            ("etcd, same host", etcd_wd, None),
            (f"etcd, other host (TTL {args.ttl:g} s)", etcd_wd, "far-away"),
        ]
        for label, wd, host in cases:
            ms = [death_to_release(wd, f"d{i}", host) * 1000 for i in range(args.runs)]
            print(
                f"holder SIGKILLed -> claim granted again, {label}: median "
                f"{statistics.median(ms):.0f} ms, max {max(ms):.0f} ms over {args.runs} runs"
            )
    finally:
        for wd in opened:
            wd.close()  # an etcd shelf revokes its lease: before etcd stops
        cluster.stop()
        shutil.rmtree(parent, ignore_errors=True)
        shutil.rmtree(cluster.root, ignore_errors=True)


if __name__ == "__main__":
    main()
