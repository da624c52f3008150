"""Claims under contention, and how fast a dead worker's claim is reaped.

    python bench/claims.py [PROCS] [ROUNDS] [--dir DIR]

1. PROCS processes (default 32) each claim and release 4 names ROUNDS times
   (default 100), retrying with backoff when a name is taken, all through
   the in-process API (`looop_py.coord.lease`). Prints acquisitions per second and
   how many attempts were refused along the way.
2. A shell worker claims a name through `looop claim` and sleeps; it is
   SIGKILLed, then `looop pulse` runs back to back until the claim is gone.
   Prints the time from the kill to the claim being reaped, and how long that
   beat took.

--dir puts the work dir under DIR (e.g. /dev/shm to leave the disk out).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cleanup, looop_cmd

from looop_py import jsonio
from looop_py.coord import holders
from looop_py.coord import lease as claims
from looop_py.errors import ClaimHeld
from looop_py.workdir.paths import Paths

NAMES = ("alpha", "beta", "gamma", "delta")


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


def contention(root: Path, procs: int, rounds: int) -> None:
    # Warm up here, so forked children share the imports (filelock, psutil) rather than redo them.
    warm = holders.own_holder("warm-up")
    claims.claim(Paths(root), "warm-up", warm, now=time.time())
    claims.unclaim(Paths(root), "warm-up", warm, now=time.time())
    ctx = multiprocessing.get_context("fork")
    refused = ctx.Value("q", 0)
    workers = [
        ctx.Process(target=contender, args=(str(root), rounds, i, refused)) for i in range(procs)
    ]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    total = procs * rounds * len(NAMES)
    print(
        f"contention: {procs} processes x {len(NAMES)} names x {rounds} rounds = {total} "
        f"claim+release cycles in {elapsed:.2f} s -> {total / elapsed:,.0f} cycles/s "
        f"({refused.value:,} refused attempts retried)"
    )
    single = Paths(root)
    me = holders.own_holder("solo")
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        claims.claim(single, "solo", me, now=time.time())
        claims.unclaim(single, "solo", me, now=time.time())
    print(f"uncontended: {n / (time.perf_counter() - start):,.0f} claim+release cycles/s")


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
    args = ap.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="looop-bench-claims-", dir=args.dir))
    root = parent / "wd"
    subprocess.run([*looop_cmd(), "init", str(root)], check=True, capture_output=True)
    for script in (root / "sensors").glob("*.sh"):
        script.unlink()
    print(f"work dir on {args.dir or tempfile.gettempdir()}, {os.cpu_count()} CPUs")
    try:
        contention(root, args.procs, args.rounds)
        reap_latency(root, args.reap_runs)
    finally:
        cleanup(root)


if __name__ == "__main__":
    main()
