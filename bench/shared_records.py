"""The shelf on files beside etcd: what a shared mailbox, round and timer cost, and how soon
an answer given on one host reaches the `looop ask` waiting on another.

    python bench/shared_records.py [N] [--dir DIR]

Starts Debian's `etcd` on free loopback ports (data in a temp dir; stopped by PID).
For each backend, in this process, N times (default 200):

1. ask: open an ask, answer it, list the pending asks (three shelf round trips and up);
2. round: save a round record and load it back;
3. timer: set a timer and read every timer (the sys-schedules probe's read).

Then, on etcd, in the fence of a held pulse: the same ask cycle on an empty prefix, to
show what fencing each write adds (the ask cycle lists every ask, so it grows with N).
Last, across hosts: a real `looop ask` waits on host a, `answer` is called in process on
host b, and the time until host a's `looop ask` prints the answer is taken (its poll
interval is mailbox.POLL_S), 10 times; the same on files (one dir).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.etcdserver starts etcd

from looop_py.asks import mailbox
from looop_py.coord import choose
from looop_py.coord.base import PULSE
from looop_py.coord.choose import open_workdir
from looop_py.engine.rounds import Phase, RoundState
from looop_py.engine.spec import LoopSpec
from looop_py.loops import store
from looop_py.schedules import timers
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init
from tests.etcdserver import Cluster, use_etcd


def workdir(
    base: Path, name: str, endpoints: list[str] | None, prefix: str, opened: list[WorkDir]
) -> WorkDir:
    """A fresh work dir, opened once (kept in `opened`, closed when the bench ends)."""
    root = init(base / name).root
    for script in (root / "sensors").glob("*.sh"):
        script.unlink()
    (root / "looop.toml").write_text('[decider]\nbackend = "noop"\n[coordination]\n')
    (root / "state").mkdir(exist_ok=True)
    (root / "state" / "host-id").write_text(name + "\n")  # per machine
    if endpoints:
        use_etcd(root / "looop.toml", endpoints, prefix, 5)
    wd = open_workdir(Paths(root))
    opened.append(wd)
    return wd


def per_op_ms(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - start) / n * 1000


def cycles(wd: WorkDir, n: int, tag: str) -> dict[str, float]:
    spec = LoopSpec.from_dict({"name": "sweep", "intent": "x", "level": "L1"})
    rounds = store.rounds_of(wd)

    def ask(i: int) -> None:
        filed = mailbox.open_ask(wd, prompt="ok?", asker=f"b{tag}", now=float(i))
        mailbox.answer(wd, filed.id, "yes", now=float(i))
        mailbox.pending(wd)

    def round_trip(i: int) -> None:
        state = RoundState(
            id=f"r{tag}{i}", spec=spec, phase=Phase.MAKER_RUNNING, started_at=1.0, updated_at=1.0
        )
        rounds.save(state)
        rounds.load(state.id)

    def timer(i: int) -> None:
        timers.write(wd, f"t{tag}{i % 20}", now=1.0, in_s=60)
        timers.load_all(wd)

    return {
        "ask": per_op_ms(ask, n),
        "round": per_op_ms(round_trip, n),
        "timer": per_op_ms(timer, n),
    }


def handoff(a: WorkDir, b: WorkDir, times: int) -> list[float]:
    """Seconds from b's answer to a's waiting `looop ask` printing it."""
    out = []
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    for _ in range(times):
        before = {x.id for x in mailbox.pending(b)}
        asking = subprocess.Popen(
            [sys.executable, "-m", "looop_py", "-C", str(a.paths.root), "ask", "--prompt", "go?"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        while True:
            new = [x for x in mailbox.pending(b) if x.id not in before]
            if new:
                break
            time.sleep(0.01)
        time.sleep(0.5)  # let it settle into its wait
        t0 = time.perf_counter()
        mailbox.answer(b, new[0].id, "go", now=time.time())
        assert asking.stdout is not None
        for line in asking.stdout:
            if line.strip() == "go":
                break
        out.append(time.perf_counter() - t0)
        asking.wait(10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=200)
    ap.add_argument("--dir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="looop-bench-shelf-", dir=args.dir))
    cluster = Cluster(base / "etcd").start()
    opened: list[WorkDir] = []
    try:
        prefix = f"/looop/bench-{uuid.uuid4().hex[:8]}"
        files = workdir(base, "files", None, "", opened)
        a = workdir(base, "a", cluster.endpoints, prefix, opened)
        b = workdir(base, "b", cluster.endpoints, prefix, opened)
        print(f"per operation, mean of {args.n} (ms)")
        f, e = cycles(files, args.n, "f"), cycles(a, args.n, "e")
        for key in f:
            print(f"  {key:<6} files {f[key]:7.3f}   etcd {e[key]:7.3f}   ({e[key] / f[key]:.1f}x)")
        c = workdir(base, "c", cluster.endpoints, f"{prefix}-fenced", opened)  # as empty as a was
        with choose.coordinator(c).pulse() as token:
            assert token is not None
            with c.shelf.fenced(PULSE, token):
                fenced = cycles(c, args.n, "e")
        print(
            f"  ask cycle fenced by the pulse token on etcd: {fenced['ask']:.3f} ms"
            f" ({fenced['ask'] / e['ask']:.2f}x unfenced)"
        )
        for name, (x, y) in {"files": (files, files), "etcd, host b → host a": (a, b)}.items():
            got = handoff(x, y, 10)
            print(
                f"answer → waiting `looop ask` prints it, {name}: median "
                f"{statistics.median(got) * 1000:.0f} ms, worst {max(got) * 1000:.0f} ms"
                f" (poll every {mailbox.POLL_S * 1000:.0f} ms)"
            )
    finally:
        for wd in opened:
            wd.close()  # an etcd shelf revokes its lease: before etcd stops
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
