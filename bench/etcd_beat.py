"""The quiet beat on etcd against the quiet beat on files, in the same run (issue #26 item 4).

    python bench/etcd_beat.py [RUNS] [--code DIR]

Starts Debian's `etcd` on free loopback ports (data on /dev/shm; stopped by PID) and
makes two work dirs alike, 8 trivial sensors and 100 goals each: one on files, one
on etcd. After the first beats have committed the world, the commands take turns,
RUNS rounds (the first 3 dropped):

- `looop pulse` on files (the sealed quiet beat),
- `looop pulse` on etcd (sealed: one transaction proves the shared keys unchanged),
- `looop pulse` on a second etcd work dir (its own prefix) while a claim is held there
  by this script (`looop claim`, its lease kept by a keeper): work in play,
- `looop pulse` on etcd with its seal removed first: the full beat that skips (takes
  the pulse, reads the shared records and the committed world, lets the pulse go),
  which is what every quiet beat on etcd was before the seal reached etcd,

and prints each median, the ratios, and how many requests etcd served for one quiet
beat and one full skipped beat (from its own /metrics: the gRPC calls its gateway
made). `--code DIR` runs `python -m looop_py` from another checkout (PYTHONPATH=DIR),
e.g. main, for a before/after in one session; the etcd server and this script stay.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.etcdserver starts etcd

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd

from tests.etcdserver import Cluster, use_etcd


def requests_served(endpoint: str) -> int:
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith("grpc_server_started_total{")
    )


def last_beat(root: Path) -> dict[str, object]:
    lines = (root / "events.jsonl").read_text().splitlines()
    return next(e for e in map(json.loads, reversed(lines)) if e.get("event") == "beat")


def workdir(name: str) -> Path:
    root = fresh_workdir(name)
    for i in range(8):
        add_sensor(root, f"s{i}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(100):
        (root / "goals" / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    (root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="?", type=int, default=20)
    ap.add_argument("--code", default=None, help="run looop from this checkout (PYTHONPATH)")
    args = ap.parse_args()
    env = dict(os.environ)
    looop = looop_cmd()
    if args.code:  # (run from "/": `python -m` puts the working directory first on the path)
        env["PYTHONPATH"] = str(Path(args.code).resolve())
        looop = [sys.executable, "-m", "looop_py"]
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="looop-bench-etcd-", dir=shm))).start()
    files_root, etcd_root, claim_root = workdir("files"), workdir("etcd"), workdir("claim")
    use_etcd(etcd_root / "looop.toml", cluster.endpoints, "/looop/bench", 10)
    use_etcd(claim_root / "looop.toml", cluster.endpoints, "/looop/bench-claim", 10)
    try:
        pulses = {
            name: [*looop, "-C", str(root), "pulse", "-q"]
            for name, root in (("files", files_root), ("etcd", etcd_root), ("claim", claim_root))
        }
        for argv in pulses.values():
            for _ in range(4):  # commit the world, then skip and seal
                subprocess.run(argv, check=True, env=env, cwd="/", stdout=subprocess.DEVNULL)
        seal = etcd_root / "state" / "quiet-seal"
        endpoint = cluster.endpoints[0]
        before = requests_served(endpoint)
        subprocess.run(pulses["etcd"], check=True, env=env, cwd="/", stdout=subprocess.DEVNULL)
        quiet_requests = requests_served(endpoint) - before
        quiet_sealed = last_beat(etcd_root).get("sealed") is True
        seal.unlink(missing_ok=True)
        before = requests_served(endpoint)
        subprocess.run(pulses["etcd"], check=True, env=env, cwd="/", stdout=subprocess.DEVNULL)
        full_requests = requests_served(endpoint) - before
        # Now a claim, held while this script runs (a keeper keeps its lease: it sends
        # requests of its own from here on, so the counts above come first).
        claim = [*looop, "-C", str(claim_root), "claim", "repo", "--session", "bench"]
        subprocess.run(
            [*claim, "--ttl", "3600"], check=True, env=env, cwd="/", stdout=subprocess.DEVNULL
        )

        def unsealed_etcd() -> list[str]:
            seal.unlink(missing_ok=True)
            return pulses["etcd"]

        commands = {
            "files: quiet beat": lambda: pulses["files"],
            "etcd: quiet beat": lambda: pulses["etcd"],
            "etcd: quiet beat, a claim held": lambda: pulses["claim"],
            "etcd: full skipped beat": unsealed_etcd,
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        sealed = {"files": 0, "etcd": 0, "claim": 0}
        for i in range(3 + args.runs):
            for name, argv_of in commands.items():
                argv = argv_of()
                start = time.perf_counter()
                subprocess.run(argv, check=True, env=env, cwd="/", stdout=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - start)
                kind = "claim" if "claim" in name else name.split(":")[0]
                if i >= 3 and "quiet" in name and last_beat(Path(argv[-3])).get("sealed"):
                    sealed[kind] += 1
        median = {name: statistics.median(s[3:]) * 1000 for name, s in times.items()}
        print(f"{os.cpu_count()} CPUs; code: {args.code or 'this checkout'}; {args.runs} rounds")
        print("8 sensors + 100 goals; etcd 1 member on loopback, data on", shm or "disk")
        for name, samples in times.items():
            ms = sorted(s * 1000 for s in samples[3:])
            print(f"  {name:31} median {median[name]:7.1f} ms   min {ms[0]:7.1f} ms")
        files = median["files: quiet beat"]
        print(
            f"  etcd quiet / files quiet {median['etcd: quiet beat'] / files:.2f}   "
            f"with a claim {median['etcd: quiet beat, a claim held'] / files:.2f}   "
            f"etcd full skipped / files quiet {median['etcd: full skipped beat'] / files:.2f}"
        )
        print(
            f"  sealed quiet beats: files {sealed['files']}/{args.runs}, "
            f"etcd {sealed['etcd']}/{args.runs}, etcd with a claim {sealed['claim']}/{args.runs}"
        )
        print(
            f"  requests etcd served: quiet beat {quiet_requests} (sealed: {quiet_sealed}), "
            f"full skipped beat {full_requests}"
        )
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)
        for root in (files_root, etcd_root, claim_root):
            cleanup(root)


if __name__ == "__main__":
    main()
