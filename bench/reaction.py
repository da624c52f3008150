"""Benchmark (h): how fast `looop up` acts on a human's answer, and what it costs idle.

Starts `looop up --interval 3600` on a fresh work dir (so no timer could explain
a beat), then N times: files an ask, waits for the beat that notices it, writes
the answer and times until the beat that carries it out. Reports the median and
worst reaction, and the resident process's CPU share over a quiet stretch.
cron, by comparison, waits up to 60 s (30 s on average).

    python bench/reaction.py [ROUNDS]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import cleanup, fresh_workdir, looop_cmd

from looop_py.asks import mailbox
from looop_py.coord.choose import open_workdir
from looop_py.workdir.paths import Paths

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10


def beats(root: Path) -> int:
    try:
        lines = (root / "events.jsonl").read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if json.loads(line).get("event") == "beat")


def wait_beats(root: Path, n: int, limit_s: float = 10.0) -> float:
    start = time.monotonic()
    while beats(root) < n:
        if time.monotonic() - start > limit_s:
            raise SystemExit(f"no beat {n} within {limit_s} s")
        time.sleep(0.002)
    return time.monotonic() - start


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    root = fresh_workdir("reaction")
    wd = open_workdir(Paths(root))  # once: the asks and answers below all go through it
    up = subprocess.Popen(
        [*looop_cmd(), "-C", str(root), "up", "--interval", "3600"], stdout=subprocess.DEVNULL
    )
    try:
        wait_beats(root, 1, limit_s=30)
        time.sleep(0.5)
        before, t0 = cpu_seconds(up.pid), time.monotonic()
        time.sleep(3.0)
        idle = (cpu_seconds(up.pid) - before) / (time.monotonic() - t0)
        reactions = []
        for i in range(ROUNDS):
            n = beats(root)
            ask = mailbox.open_ask(wd, prompt=f"Deploy build {i}?", asker="human", now=time.time())
            wait_beats(root, n + 1)  # the beat the new ask causes
            time.sleep(0.2)  # let it settle, as a human takes a moment to answer
            n = beats(root)
            start = time.monotonic()
            mailbox.answer(wd, ask.id, "yes", now=time.time())
            wait_beats(root, n + 1)
            reactions.append(time.monotonic() - start)
    finally:
        up.terminate()
        up.wait(timeout=10)
        wd.close()
    ms = sorted(r * 1000 for r in reactions)
    print(f"looop up: answer → beat, {ROUNDS} rounds")
    median = statistics.median(ms)
    print(f"  median {median:6.0f} ms   worst {ms[-1]:6.0f} ms   (cron: up to 60,000 ms)")
    print(f"  idle CPU between beats {idle:.2%}")
    cleanup(root)


if __name__ == "__main__":
    main()
