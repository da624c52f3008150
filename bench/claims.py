"""Claims under contention, and how fast a dead worker's claim is reaped.

    python bench/claims.py [PROCS] [ROUNDS] [--dir DIR] [--no-reap]

1. PROCS processes (default 32) each claim and release 4 names ROUNDS times
   (default 100), retrying with backoff when a name is taken, all through
   the in-process API (`looop_py.coord.lease`), interleaved REPEATS times with the
   floor: the same processes running a minimal flock loop (create the claim file
   under a per-name flock, unlink it under the same lock). Prints cycles per second
   for both, their ratio, and the same for one process without contention.
2. A shell worker claims a name through `looop claim` and sleeps; it is
   SIGKILLed, then `looop pulse` runs back to back until the claim is gone.
   Prints the time from the kill to the claim being reaped, and how long that
   beat took.

--dir puts the work dir under DIR (e.g. /dev/shm to leave the disk out).
"""

from __future__ import annotations

import argparse
import fcntl
import multiprocessing
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cleanup, looop_cmd

from looop_py import jsonio
from looop_py.coord import holders
from looop_py.coord import lease as claims
from looop_py.errors import ClaimHeld
from looop_py.workdir.paths import Paths

NAMES = ("alpha", "beta", "gamma", "delta")
REPEATS = 5


def contender(root: str, rounds: int, seed: int, refused: multiprocessing.Value) -> None:  # type: ignore[valid-type]
    rng = random.Random(seed)
    paths = Paths(Path(root))
    holder = holders.own_holder(f"p{os.getpid()}")
    order = list(NAMES)
    misses = 0
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            tries = 0
            while True:
                try:
                    claims.claim(paths, name, holder, now=time.time())
                    break
                except ClaimHeld:
                    tries += 1
                    time.sleep(rng.uniform(0, min(0.02, 0.0005 * 2**tries)))
            misses += tries
            claims.unclaim(paths, name, holder, now=time.time())
    with refused.get_lock():
        refused.value += misses


def floor_contender(root: str, rounds: int, seed: int, refused: multiprocessing.Value) -> None:  # type: ignore[valid-type]
    """The floor: a minimal flock loop doing what a claim must — under a per-name flock,
    create the claim file if absent (refused if present); to release, unlink it under the
    same lock. No epoch, no holder check, no JSON: the least a lock-file protocol costs."""
    rng = random.Random(seed)
    body = b'{"name": "x", "session": "p", "pid": 1, "create_time": 1.0, "epoch": 1}\n' * 3
    locks, order, misses = f"{root}/claims/.floor", list(NAMES), 0
    os.makedirs(locks, exist_ok=True)

    def under_lock(name: str, act: Callable[[], None]) -> None:
        fd = os.open(f"{locks}/{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            act()
        finally:
            os.close(fd)

    def create(path: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        os.write(fd, body)
        os.close(fd)

    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            path, tries = f"{locks}/{name}.claim", 0
            while True:
                try:
                    under_lock(name, lambda p=path: create(p))
                    break
                except FileExistsError:
                    tries += 1
                    time.sleep(rng.uniform(0, min(0.02, 0.0005 * 2**tries)))
            misses += tries
            under_lock(name, lambda p=path: os.unlink(p))
    with refused.get_lock():
        refused.value += misses


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def race(
    target: Callable[..., None], root: Path, procs: int, rounds: int
) -> tuple[float, int, float]:
    """(seconds, refused attempts, CPU seconds) for PROCS forked processes running `target`."""
    cpu = children_cpu()
    ctx = multiprocessing.get_context("fork")
    refused = ctx.Value("q", 0)
    workers = [
        ctx.Process(target=target, args=(str(root), rounds, i, refused)) for i in range(procs)
    ]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start, refused.value, children_cpu() - cpu


def contention(root: Path, procs: int, rounds: int) -> None:
    # Warm up here, so forked children share what a claim loads rather than redo it.
    warm = holders.own_holder("warm-up")
    claims.claim(Paths(root), "warm-up", warm, now=time.time())
    claims.unclaim(Paths(root), "warm-up", warm, now=time.time())
    total = procs * rounds * len(NAMES)
    wall: dict[str, list[float]] = {"looop": [], "floor": []}
    cpu: dict[str, list[float]] = {"looop": [], "floor": []}
    refused = {"looop": 0, "floor": 0}
    for _ in range(REPEATS):  # interleaved: a loaded machine slows both alike
        for kind, target in (("looop", contender), ("floor", floor_contender)):
            took, missed, used = race(target, root, procs, rounds)
            wall[kind].append(took)
            cpu[kind].append(used)
            refused[kind] += missed
    a, b = total / statistics.median(wall["looop"]), total / statistics.median(wall["floor"])
    print(
        f"contention: {procs} processes x {len(NAMES)} names x {rounds} rounds = {total} "
        f"claim+release cycles: looop {a:,.0f}/s, flock floor {b:,.0f}/s -> {a / b:.2f}x "
        f"(median of {REPEATS})"
    )
    ca, cb = (statistics.median(cpu[k]) / total * 1e6 for k in ("looop", "floor"))
    print(
        f"  CPU per cycle (all processes): looop {ca:.0f} us, floor {cb:.0f} us -> {cb / ca:.2f}x;"
        f" refused attempts retried per run: looop {refused['looop'] // REPEATS:,},"
        f" floor {refused['floor'] // REPEATS:,}"
    )

    single = Paths(root)
    me = holders.own_holder("solo")
    n = 2000

    def solo_looop() -> None:
        claims.claim(single, "solo", me, now=time.time())
        claims.unclaim(single, "solo", me, now=time.time())

    path = f"{root}/claims/.floor/solo.claim"
    lock = f"{root}/claims/.floor/solo.lock"
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def solo_floor() -> None:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        c = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        os.write(c, b"{}" * 100)
        os.close(c)
        os.close(fd)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.unlink(path)
        os.close(fd)

    rates: dict[str, list[float]] = {"looop": [], "floor": []}
    cpu_rates: dict[str, list[float]] = {"looop": [], "floor": []}
    for _ in range(REPEATS):
        for kind, cycle in (("looop", solo_looop), ("floor", solo_floor)):
            start, cpu0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                cycle()
            rates[kind].append(n / (time.perf_counter() - start))
            cpu_rates[kind].append(n / (time.process_time() - cpu0))
    a, b = statistics.median(rates["looop"]), statistics.median(rates["floor"])
    ca, cb = statistics.median(cpu_rates["looop"]), statistics.median(cpu_rates["floor"])
    print(f"uncontended: looop {a:,.0f}/s, flock floor {b:,.0f}/s -> {a / b:.2f}x", end="")
    print(f"; per CPU second: looop {ca:,.0f}, floor {cb:,.0f} -> {ca / cb:.2f}x")


def reap_latency(root: Path, runs: int) -> None:
    samples, beats = [], []
    for i in range(runs):
        marker = root / f"claimed-{i}"
        script = f'"$LOOOP_BIN" claim bench-{i} > "{marker}" && sleep 60'
        subprocess.run(
            [*looop_cmd(), "-C", str(root), "worker", "start", f"w{i}", script],
            check=True,
            capture_output=True,
        )
        while not (marker.exists() and marker.read_text().strip()):
            time.sleep(0.005)
        meta = jsonio.read_json(root / "sessions" / f"w{i}" / "meta.json")
        claim_file = root / "claims" / f"bench-{i}.json"
        killed = time.perf_counter()
        os.killpg(meta["pid"], signal.SIGKILL)
        while claim_file.exists():
            t0 = time.perf_counter()
            subprocess.run([*looop_cmd(), "-C", str(root), "pulse", "-q"], check=True)
            beat = time.perf_counter() - t0
        samples.append(time.perf_counter() - killed)
        beats.append(beat)
    ms = sorted(s * 1000 for s in samples)
    print(
        f"death -> claim reaped (back-to-back beats): median {ms[len(ms) // 2]:.0f} ms, "
        f"max {ms[-1]:.0f} ms over {runs} runs; the reaping beat took "
        f"median {sorted(beats)[len(beats) // 2] * 1000:.0f} ms"
    )
    print("  (under cron the wait is dominated by the beat period: at most one interval)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("procs", nargs="?", type=int, default=32)
    ap.add_argument("rounds", nargs="?", type=int, default=100)
    ap.add_argument("--dir", default=None, help="parent dir of the work dir")
    ap.add_argument("--reap-runs", type=int, default=5)
    ap.add_argument("--no-reap", action="store_true", help="the contention figures only")
    args = ap.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="looop-bench-claims-", dir=args.dir))
    root = parent / "wd"
    subprocess.run([*looop_cmd(), "init", str(root)], check=True, capture_output=True)
    for script in (root / "sensors").glob("*.sh"):
        script.unlink()
    print(f"work dir on {args.dir or tempfile.gettempdir()}, {os.cpu_count()} CPUs")
    try:
        contention(root, args.procs, args.rounds)
        if not args.no_reap:
            reap_latency(root, args.reap_runs)
    finally:
        cleanup(root)


if __name__ == "__main__":
    main()
