"""Benchmark: `looop up` on etcd — how soon another host's answer starts a beat, and what
an idle `up` asks of etcd.

Starts Debian's `etcd` on a free loopback port (data on /dev/shm; stopped by PID) and two
work dirs on one prefix (hosts a and b). Host a runs `looop up --interval 3600`; ROUNDS
times, an ask is opened, and once host a's beat for it has run, host b answers it in this
process; the figure is the time from the answer to host a's next beat line, *minus that
beat's own `ms`* (how long the answer waited). Then host a idles for IDLE_S seconds and
etcd's own /metrics say how many requests it served meanwhile, by method (gRPC calls its
gateway made). `--code DIR` runs looop from another checkout (PYTHONPATH), e.g. main, for
a before/after in one session.

    python bench/etcd_reaction.py [ROUNDS] [IDLE_S] [--code DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.etcdserver starts etcd

from _common import cleanup, fresh_workdir, looop_cmd
from reaction import Tail

from looop_py.asks import mailbox
from looop_py.coord.choose import open_workdir
from looop_py.workdir.paths import Paths
from tests.etcdserver import Cluster, use_etcd


def calls(endpoint: str) -> dict[str, int]:
    with urllib.request.urlopen(f"{endpoint}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    found: dict[str, int] = {}
    pattern = r'grpc_server_started_total\{[^}]*grpc_method="(\w+)"[^}]*\} (\d+)'
    for m in re.finditer(pattern, text):
        found[m.group(1)] = found.get(m.group(1), 0) + int(m.group(2))
    return found


def host(name: str, cluster: Cluster) -> Path:
    root = fresh_workdir(name)
    (root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
    use_etcd(root / "looop.toml", cluster.endpoints, "/looop/bench-reaction", 10)
    (root / "state").mkdir(exist_ok=True)
    (root / "state" / "host-id").write_text(f"{name}\n")
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=10)
    ap.add_argument("idle_s", nargs="?", type=float, default=10.0)
    ap.add_argument("--code", default=None, help="run looop from this checkout (PYTHONPATH)")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    looop = looop_cmd()
    if args.code:
        env["PYTHONPATH"] = str(Path(args.code).resolve())
        looop = [sys.executable, "-m", "looop_py"]
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    tmp = Path(tempfile.mkdtemp(prefix="looop-bench-etcd-", dir=shm))
    cluster = Cluster(tmp).start()
    a, b = host("a", cluster), host("b", cluster)
    wd_a, wd_b = open_workdir(Paths(a)), open_workdir(Paths(b))
    tail = Tail(a)
    up = subprocess.Popen(
        [*looop, "-C", str(a), "up", "--interval", "3600"],
        env=env,
        cwd="/",
        stdout=subprocess.DEVNULL,
    )
    waited: list[float] = []
    try:
        tail.next_beat()
        for i in range(args.rounds):
            ask = mailbox.open_ask(wd_a, prompt=f"Deploy {i}?", asker="human", now=time.time())
            time.sleep(1.5)  # the beat the ask causes (at once, or at the next poll)
            tail.beats()
            start = time.monotonic()
            mailbox.answer(wd_b, ask.id, "yes", now=time.time())
            seen, event = tail.next_beat()
            waited.append((seen - start) * 1000 - float(event.get("ms", 0.0)))
        time.sleep(1.0)
        before = calls(cluster.endpoints[0])
        time.sleep(args.idle_s)
        after = calls(cluster.endpoints[0])
    finally:
        up.terminate()
        up.wait(timeout=30)
        wd_a.close()
        wd_b.close()
        cluster.stop()
        cleanup(a)
        cleanup(b)
        shutil.rmtree(tmp, ignore_errors=True)
    idle = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    ms = sorted(waited)
    print(f"another host's answer -> beat, above the beat, {args.rounds} rounds:")
    print(f"  median {statistics.median(ms):.1f} ms   min {ms[0]:.1f}   max {ms[-1]:.1f}")
    print(f"requests etcd started while `up` idled {args.idle_s:g} s: {idle or 'none'}")


if __name__ == "__main__":
    main()
