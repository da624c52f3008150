"""The quiet beat on etcd against the quiet beat on files, in the same run (issue #26 item 4),
idle and with work in play.

    python bench/etcd_beat.py [RUNS] [--code DIR] [--kinds KIND,...]

Starts Debian's `etcd` on free loopback ports (data on /dev/shm; stopped by PID) and
makes work dirs alike, 8 trivial sensors and 100 goals each: one on files, the others on
etcd, each under its own prefix. After the first beats have committed the world and
sealed what they can, the commands take turns, RUNS rounds (the first 3 dropped):

- files: `looop pulse` on files (the sealed quiet beat: the floor);
- etcd: `looop pulse` on etcd, nothing in play (one transaction proves the shared keys
  unchanged);
- claim: a claim held by a live process on this host (`looop claim --pid`, its lease
  kept by a keeper): its key rides on that lease;
- ask: a `looop ask` waiting on a human's answer (the ask is a key; its waiter a process
  here);
- worker: a live shell worker writing a line to its output every 100 ms (sessions stay
  on the host that runs them);
- round: a loop round whose shell maker runs (the round and its claim are keys; its
  worker runs here), started by the rules decider when its trigger sensor appeared;
- all: the claim, the ask, the worker and the round at once;
- full: `looop pulse` on the idle etcd work dir with its seal removed first: the full
  beat that skips (takes the pulse, reads the shared records and the committed world).

Each beat is timed by the wall clock and by the CPU time (user + sys) of the children it
waited for (resource.getrusage), which a loaded machine inflates less; medians of both
are printed, each divided by the files beat of the same run. Then one beat of each kind
more, alone, for how many requests etcd served during it (its own /metrics: the gRPC
calls its gateway made, LeaseKeepAlive left out: the keepers of the claim's and the
workers' leases send those on their own clock) and whether it was sealed.
`--code DIR` runs `python -m looop_py` from another checkout (PYTHONPATH=DIR), e.g. main,
for a before/after in one session; the etcd server and this script stay.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.etcdserver starts etcd

from _common import LOOP, WORKER, add_sensor, cleanup, fresh_workdir, looop_cmd

from tests.etcdserver import Cluster, use_etcd

KINDS = ("etcd", "claim", "ask", "worker", "round", "all")


def requests_served(endpoint: str) -> int:
    """gRPC calls etcd started, LeaseKeepAlive left out (keepers send it on their clock)."""
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("grpc_server_started_total{") and "LeaseKeepAlive" not in line
    )


def last_beat(root: Path) -> dict[str, object]:
    lines = (root / "events.jsonl").read_text().splitlines()
    return next(e for e in map(json.loads, reversed(lines)) if e.get("event") == "beat")


def workdir(name: str, config: str = '[decider]\nbackend = "noop"\n') -> Path:
    root = fresh_workdir(name)
    for i in range(8):
        add_sensor(root, f"s{i}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(100):
        (root / "goals" / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    (root / "looop.toml").write_text(config)
    return root


def wait(what: Callable[[], bool]) -> None:
    """Setting up, not measuring: poll until `what` holds (60 s at most)."""
    deadline = time.monotonic() + 60
    while not what():
        if time.monotonic() > deadline:
            raise SystemExit("setting up took over 60 s")
        time.sleep(0.02)


def put_in_play(
    kind: str, root: Path, looop: list[str], env: dict[str, str], holder: int
) -> list[subprocess.Popen[bytes]]:
    """The work in play of `kind` (the round started already, by the first beat's rules)."""
    started: list[subprocess.Popen[bytes]] = []

    def run(*args: str) -> None:
        subprocess.run([*looop, "-C", str(root), *args], check=True, env=env, cwd="/",
                       capture_output=True)  # fmt: skip

    if kind in ("claim", "all"):
        run("claim", "repo", "--session", "bench", "--ttl", "86400", "--pid", str(holder))
    if kind in ("ask", "all"):
        argv = [*looop, "-C", str(root), "ask", "--prompt", "ship it?"]
        out = subprocess.DEVNULL
        started.append(subprocess.Popen(argv, env=env, cwd="/", stdout=out, stderr=out))
        shown = [*looop, "-C", str(root), "asks", "--json"]

        def waiting() -> bool:
            found = subprocess.run(shown, check=False, env=env, cwd="/", capture_output=True)
            return b"waiter" in found.stdout

        wait(waiting)
    if kind in ("worker", "all"):
        run("worker", "start", "w1", "--runtime", "shell", WORKER)
        wait(lambda: '"running"' in (root / "sessions" / "w1" / "status.json").read_text())
    if kind in ("round", "all"):
        wait(lambda: bool(list((root / "sessions").glob("*.maker/meta.json"))))
    return started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="?", type=int, default=20)
    ap.add_argument("--code", default=None, help="run looop from this checkout (PYTHONPATH)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"of {','.join(KINDS)}")
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    env = dict(os.environ)
    looop = looop_cmd()
    if args.code:  # (run from "/": `python -m` puts the working directory first on the path)
        env["PYTHONPATH"] = str(Path(args.code).resolve())
        looop = [sys.executable, "-m", "looop_py"]
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="looop-bench-etcd-", dir=shm))).start()
    holder = subprocess.Popen(["sleep", "86400"])  # the claim's live holder
    roots = {"files": workdir("files")}
    for kind in kinds:
        roots[kind] = workdir(
            kind, "" if kind in ("round", "all") else '[decider]\nbackend = "noop"\n'
        )
        if kind in ("round", "all"):  # the rules decider starts it when s1 first appears
            (roots[kind] / "goals" / "sweep.md").write_text(LOOP.format(root=roots[kind]))
        use_etcd(roots[kind] / "looop.toml", cluster.endpoints, f"/looop/bench-{kind}", 10)
    started: list[subprocess.Popen[bytes]] = []
    try:
        pulses = {kind: [*looop, "-C", str(root), "pulse", "-q"] for kind, root in roots.items()}
        for kind, argv in pulses.items():
            subprocess.run(argv, check=True, env=env, cwd="/", stdout=subprocess.DEVNULL)
            started += put_in_play(kind, roots[kind], looop, env, holder.pid)
            for _ in range(3):  # the next beats see what is in play, then seal what they can
                subprocess.run(argv, check=True, env=env, cwd="/", stdout=subprocess.DEVNULL)
        endpoint = cluster.endpoints[0]
        idle = roots.get("etcd")

        def full() -> list[str]:
            assert idle is not None
            (idle / "state" / "quiet-seal").unlink(missing_ok=True)
            return pulses["etcd"]

        commands: dict[str, Callable[[], list[str]]] = {
            kind: (lambda argv=argv: argv) for kind, argv in pulses.items()
        }
        if idle is not None:
            commands["full"] = full
        wall: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        sealed = dict.fromkeys(commands, 0)
        for i in range(3 + args.runs):
            for name, argv_of in commands.items():
                argv = argv_of()
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(argv, check=True, env=env, cwd="/", stdout=subprocess.DEVNULL)
                wall[name].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(
                    after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                )
                if i >= 3 and last_beat(Path(argv[-3])).get("sealed"):
                    sealed[name] += 1
        requests: dict[str, int] = {}
        for name, argv_of in commands.items():  # one more beat each, alone, for its requests
            argv = argv_of()
            before_n = requests_served(endpoint)
            subprocess.run(argv, check=True, env=env, cwd="/", stdout=subprocess.DEVNULL)
            requests[name] = requests_served(endpoint) - before_n
        print(f"{os.cpu_count()} CPUs; code: {args.code or 'this checkout'}; {args.runs} rounds")
        print("8 sensors + 100 goals; etcd 1 member on loopback, data on", shm or "disk")
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        floor = {
            "wall": statistics.median(wall["files"][3:]),
            "cpu": statistics.median(cpu["files"][3:]),
        }
        print(f"  {'case':8} {'wall ms':>8} {'÷ files':>8} {'cpu ms':>8} {'÷ files':>8}"
              f" {'requests':>9} {'sealed':>7}")  # fmt: skip
        for name in commands:
            w, c = statistics.median(wall[name][3:]), statistics.median(cpu[name][3:])
            print(
                f"  {name:8} {w * 1000:8.1f} {w / floor['wall']:8.2f} {c * 1000:8.1f}"
                f" {c / floor['cpu']:8.2f} {requests[name] if name != 'files' else '-':>9}"
                f" {sealed[name]:>3}/{args.runs}"
            )
    finally:
        for proc in [holder, *started]:
            proc.kill()
            proc.wait()
        for kind in ("worker", "all"):
            if kind in roots:
                stop = [*looop, "-C", str(roots[kind]), "worker", "kill", "w1"]
                subprocess.run(stop, check=False, capture_output=True, env=env, cwd="/")
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)
        for root in roots.values():
            cleanup(root)  # the round's maker ends with its work dir


if __name__ == "__main__":
    main()
