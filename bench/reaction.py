"""Benchmark (h): how fast `looop up` acts on an edit, and what it costs idle.

1. Reaction: starts `looop up --interval 3600` on a work dir with 10 goals (so no
   timer could explain a beat), then ROUNDS times each: answers a pending ask, edits
   a goal, edits a sensor, and times until the beat that follows is logged. The
   figure is that time *above the beat's own cost* (the beat's `ms` in events.jsonl):
   how long the edit waited before a beat started. The floor is `inotifywait`
   (inotify-tools, when installed) printing the same kind of edit, measured in the
   same run: how long the kernel takes to tell any process.
2. Idle CPU of the resident process at 10 / 1,000 / 10,000 goals over IDLE_S seconds
   (from /proc/PID/stat; one clock tick is 10 ms, so 5 s resolves 0.2 %, and the
   figure is reported in ticks too). cron, by comparison, waits up to 60 s.

    python bench/reaction.py [ROUNDS] [IDLE_S]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd

from looop_py.asks import mailbox
from looop_py.coord.choose import open_workdir
from looop_py.workdir.paths import Paths

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
IDLE_S = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0


class Tail:
    """The beats appended to events.jsonl since the last look (read from where it left)."""

    def __init__(self, root: Path) -> None:
        self.path = root / "events.jsonl"
        self.at = 0
        self.partial = b""

    def beats(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.at)
                data = f.read()
        except FileNotFoundError:
            return []
        self.at += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        return [e for e in map(json.loads, filter(None, lines)) if e.get("event") == "beat"]

    def next_beat(self, limit_s: float = 30.0) -> tuple[float, dict]:
        """(when the next beat's line was seen, its event)."""
        start = time.monotonic()
        while True:
            found = self.beats()
            if found:
                return time.monotonic(), found[-1]
            if time.monotonic() - start > limit_s:
                raise SystemExit(f"no beat within {limit_s} s")
            time.sleep(0.0005)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_up(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*looop_cmd(), "-C", str(root), "up", "--interval", "3600"], stdout=subprocess.DEVNULL
    )


def stop(up: subprocess.Popen[bytes]) -> None:
    up.terminate()
    up.wait(timeout=30)


def goals(root: Path, n: int) -> None:
    for i in range(n):
        (root / "goals" / f"goal-{i:05}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")


def reaction(rounds: int) -> dict[str, list[float]]:
    root = fresh_workdir("reaction")
    goals(root, 10)
    add_sensor(root, "s0", 'echo \'{"signal": {"n": 0}, "detail": {}}\'')
    wd = open_workdir(Paths(root))  # once: the asks and answers below all go through it
    tail = Tail(root)
    up = start_up(root)
    above: dict[str, list[float]] = {"answer": [], "goal edit": [], "sensor edit": []}
    try:
        tail.next_beat()
        for i in range(rounds):
            ask = mailbox.open_ask(wd, prompt=f"Deploy build {i}?", asker="human", now=time.time())
            tail.next_beat()  # the beat the new ask causes
            goal, signal = f"# v{i}\n", f'echo \'{{"signal": {{"n": {i}}}}}\''
            edits: dict[str, Callable[[], object]] = {
                "answer": lambda a=ask.id: mailbox.answer(wd, a, "yes", now=time.time()),
                "goal edit": lambda g=goal: (root / "goals" / "goal-00000.md").write_text(g),
                "sensor edit": lambda s=signal: add_sensor(root, "s0", s),
            }
            for kind, edit in edits.items():
                time.sleep(0.05)  # let the last beat's own writes settle (and any beat they cause)
                tail.beats()
                start = time.monotonic()
                edit()
                seen, event = tail.next_beat()
                above[kind].append((seen - start) * 1000 - float(event.get("ms", 0.0)))
    finally:
        stop(up)
        wd.close()
        cleanup(root)
    return above


def inotifywait_floor(rounds: int) -> list[float] | None:
    """ms from writing a goal to `inotifywait -m` printing it: the kernel's floor."""
    if shutil.which("inotifywait") is None:
        return None
    root = fresh_workdir("reaction-floor")
    watcher = subprocess.Popen(
        ["inotifywait", "-m", "-e", "close_write,moved_to", str(root / "goals")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert watcher.stdout is not None and watcher.stderr is not None
    try:
        while b"established" not in watcher.stderr.readline():
            pass  # "Setting up watches." first
        probe = root / "goals" / "probe.md"
        samples = []
        for i in range(rounds * 3):
            start = time.monotonic()
            probe.write_text(f"# v{i}\n")
            watcher.stdout.readline()
            samples.append((time.monotonic() - start) * 1000)
        return samples
    finally:
        watcher.terminate()
        watcher.wait()
        cleanup(root)


def idle_cpu(n_goals: int) -> tuple[float, float]:
    """(share of a core, clock ticks used) by an idle `looop up` over IDLE_S seconds."""
    root = fresh_workdir(f"idle-{n_goals}")
    goals(root, n_goals)
    tail = Tail(root)
    up = start_up(root)
    try:
        tail.next_beat(limit_s=300)
        time.sleep(1.0)  # let the first beat's writes settle
        before, t0 = cpu_seconds(up.pid), time.monotonic()
        time.sleep(IDLE_S)
        used = cpu_seconds(up.pid) - before
        return used / (time.monotonic() - t0), used * os.sysconf("SC_CLK_TCK")
    finally:
        stop(up)
        cleanup(root)


def main() -> None:
    print(f"looop up: an edit → the beat it starts, above the beat's own cost, {ROUNDS} rounds")
    above = reaction(ROUNDS)
    floor = inotifywait_floor(ROUNDS)
    for kind, ms in above.items():
        ms.sort()
        print(f"  {kind:12} median {statistics.median(ms):6.1f} ms   worst {ms[-1]:6.1f} ms")
    every = sorted(x for ms in above.values() for x in ms)
    if floor is not None:
        f = statistics.median(floor)
        print(f"  floor: inotifywait prints a goal write: median {f:.2f} ms")
        m = statistics.median(every)
        print(f"  all edits: median {m:.1f} ms above the beat ({m / f:.0f}× the floor)")
    else:
        print(f"  all edits: median {statistics.median(every):.1f} ms (no inotifywait: no floor)")
    for n in (10, 1000, 10000):
        share, ticks = idle_cpu(n)
        print(f"  idle CPU at {n:6,} goals: {share:.3%} of a core", end="")
        print(f" ({ticks:.0f} clock ticks in {IDLE_S:g} s)", flush=True)


if __name__ == "__main__":
    main()
