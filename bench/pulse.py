"""The sticky pulse, measured: epochs (new pulse holders) while 3 hosts pulse every few
seconds on a real 3-member etcd, how many of their pulses stepped aside, and the failover
time after the holder is SIGKILLed. Epochs are counted from etcd's own history of the
pulse key (a watch from the first revision of the window: every create is a new holder),
not from what looop says.

    python bench/pulse.py [--window 150] [--every 3] [--ttl 4] [--kills 3] [--code DIR]

`--code DIR` runs the hosts on another checkout's looop_py (the before figure).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.* start etcd, the rig

import etcd3gw

from tests.coord.faultrig import Rig
from tests.etcdserver import Cluster


class Host:
    """One host pulsing every `every` s (as cron or a timer would) until stopped."""

    def __init__(self, rig: Rig, name: str, every: float) -> None:
        self.rig, self.name, self.every = rig, name, every
        self.outcomes: Counter[str] = Counter()
        self.stop = threading.Event()
        self.proc: subprocess.Popen[str] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            self.proc = self.rig.pulse(self.name, "pulse", "--json")
            out, _ = self.proc.communicate()
            if self.stop.is_set():
                return
            try:
                self.outcomes[json.loads(out)["outcome"]] += 1
            except (ValueError, KeyError, TypeError):
                self.outcomes[f"exit {self.proc.returncode}"] += 1
            self.stop.wait(max(0.0, self.every - (time.monotonic() - started)))

    def kill(self) -> None:
        self.stop.set()
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)


def history(client: etcd3gw.Etcd3Client, key: str, start: int, end: int) -> list[dict]:  # type: ignore[type-arg]
    """Every change of `key` from revision `start` through `end`, from etcd's history."""
    events, cancel = client.watch(key, start_revision=start)
    found = []
    try:
        for ev in events:
            kv = ev.get("kv", {})
            found.append({"type": ev.get("type", "PUT"), **kv})
            if int(kv.get("mod_revision", 0)) >= end:
                break
    finally:
        cancel()
    return found


def revision(client: etcd3gw.Etcd3Client) -> int:
    return int(client.status()["header"]["revision"])


def holder(client: etcd3gw.Etcd3Client, key: str) -> tuple[str | None, int]:
    found = client.get(key, metadata=True)
    if not found:
        return None, 0
    value, meta = found[0]
    return json.loads(value).get("host"), int(meta["create_revision"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=150.0)
    ap.add_argument("--every", type=float, default=3.0)
    ap.add_argument("--ttl", type=float, default=4.0)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--code", default="", help="run the hosts on this looop_py checkout")
    args = ap.parse_args()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    base = Path(tempfile.mkdtemp(prefix="looop-bench-pulse-", dir=shm))
    cluster = Cluster(base / "etcd", size=3).start()
    try:
        prefix = f"/looop/p-{uuid.uuid4().hex[:8]}"
        rig = Rig(base / "rig", cluster.endpoints, prefix, ttl=args.ttl, code=args.code)
        rig.tmp.mkdir()
        rig.scripts()
        for name in "abc":
            (rig.host(name) / "looop.toml").write_text(
                (rig.host(name) / "looop.toml")
                .read_text()
                .replace('backend = "command"', 'backend = "noop"')
            )
        host, port = cluster.endpoints[0].removeprefix("http://").split(":")
        client = etcd3gw.client(host=host, port=int(port), api_path="/v3/")
        pkey = f"{prefix}/claims/pulse"

        hosts = {n: Host(rig, n, args.every) for n in "abc"}
        start = revision(client)
        t0 = time.monotonic()
        for h in hosts.values():
            h.thread.start()
        time.sleep(args.window)
        end = revision(client)
        epochs = sum(1 for e in history(client, pkey, start, end) if str(e.get("version")) == "1")
        pulses = Counter[str]()
        for h in hosts.values():
            pulses.update(h.outcomes)
        total = sum(pulses.values())
        print(
            f"{len(hosts)} hosts pulsing every {args.every:g} s, TTL {args.ttl:g} s,"
            f" {time.monotonic() - t0:.0f} s: {epochs} epochs (new pulse holders);"
            f" {total} pulses: {dict(pulses)};"
            f" stepped aside {pulses['locked'] / max(1, total):.0%}"
        )

        failovers = []
        for _ in range(args.kills):
            name, token = holder(client, pkey)
            if name is None or name not in hosts or hosts[name].stop.is_set():
                time.sleep(args.every)
                continue
            live = [h for n, h in hosts.items() if n != name and not h.stop.is_set()]
            if not live:
                break
            killed = time.monotonic()
            hosts[name].kill()
            while time.monotonic() - killed < 10 * args.ttl:
                new, new_token = holder(client, pkey)
                if new_token and new_token != token and new != name:
                    failovers.append(time.monotonic() - killed)
                    break
                time.sleep(0.05)
            hosts[name] = Host(rig, name, args.every)  # it comes back, as after a restart
            hosts[name].thread.start()
            time.sleep(2 * args.every)
        print(
            "failover after SIGKILL of the holder's beat loop (s): "
            + ", ".join(f"{f:.1f}" for f in failovers)
            + f" (TTL {args.ttl:g} s + one beat every {args.every:g} s)"
        )
        for h in hosts.values():
            h.kill()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
