"""The fence at the side effect, measured: a pulse holder paused (SIGSTOP) inside its decide
or its act while another host takes over, on a real 3-member etcd, counted from an act log
the command itself appends to (tests/coord/faultrig.py); and the quiet beat on etcd beside
files, in the same run.

    python bench/fence.py [ROUNDS] [--code DIR] [--quiet N]

Each round: host a starts a forced beat; once it is inside its decide (or its act) it is
stopped until host b has taken the pulse and acted, then resumed. Reported per scenario:
acts host a started after host b had acted (a stale holder's side effect overlapping
its successor's), acts started after their renew deadline, and beats of a that left
nothing in a's journal about their decision. `--code DIR` runs the hosts on another
checkout's looop_py (e.g. one from before the fence) for the before figure.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.* start etcd, the rig

from looop_py.workdir.template import init
from tests.coord.faultrig import Rig, count
from tests.etcdserver import Cluster


def until(check, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
    return False


def scenario(rig: Rig, where: str) -> dict[str, int]:
    before = {a.id for a in count(rig.log).acts}
    rig.beat("b", "down")  # b took the pulse last round and keeps it (sticky): hand it over
    a = rig.pulse("a")
    pid = rig.deciding("a")
    if where == "act":
        rig.acting("a")
    os.kill(pid, signal.SIGSTOP)
    try:

        def b_acted() -> bool:
            rig.beat("b")
            return any(x.host == "b" and x.id not in before for x in count(rig.log).acts)

        until(b_acted, 40)
    finally:
        os.kill(pid, signal.SIGCONT)
    a.communicate(timeout=60)
    new = [x for x in count(rig.log).acts if x.id not in before]
    b_first = min((x.start for x in new if x.host == "b"), default=float("inf"))
    journal = rig.journal("a")
    mine = [x for x in new if x.host == "a"]
    # Every act of a's in its journal (by its command's id), or its decision said not acted.
    hidden = sum(1 for x in mine if x.id not in journal)
    if not mine and "not acted" not in journal:
        hidden += 1
    return {
        "a_after_b": sum(1 for x in mine if x.start > b_first),
        "late": sum(1 for x in new if x.start > x.deadline),
        "a_acts": len(mine),
        "unjournaled": hidden,
    }


def quiet_ms(root: Path, env: dict[str, str], n: int) -> float:
    cmd = [sys.executable, "-m", "looop_py", "-C", str(root), "pulse"]
    subprocess.run(cmd, env=env, capture_output=True, check=False, cwd=root)  # commit first
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=False, cwd=root)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", nargs="?", type=int, default=5)
    ap.add_argument("--code", default="", help="run the hosts on this looop_py checkout")
    ap.add_argument("--quiet", type=int, default=20, help="quiet beats timed per backend")
    args = ap.parse_args()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    base = Path(tempfile.mkdtemp(prefix="looop-bench-fence-", dir=shm))
    cluster = Cluster(base / "etcd", size=3).start()
    try:
        for where in ("decide", "act"):
            rig = Rig(base / where, cluster.endpoints, f"/looop/b-{uuid.uuid4().hex[:8]}",
                      code=args.code)  # fmt: skip
            rig.tmp.mkdir()
            rig.scripts(decide_s=0.3, act_s=1.0 if where == "act" else 0.0)
            totals: dict[str, int] = {}
            t = time.monotonic()
            for _ in range(args.rounds):
                for k, v in scenario(rig, where).items():
                    totals[k] = totals.get(k, 0) + v
            print(
                f"paused inside {where}: {args.rounds} rounds in {time.monotonic() - t:.0f} s:"
                f" acts by the paused host {totals['a_acts']}, of them after its successor"
                f" acted {totals['a_after_b']}; started after the renew deadline"
                f" {totals['late']}; decisions not in its journal {totals['unjournaled']}"
            )
        rig = Rig(base / "quiet", cluster.endpoints, f"/looop/q-{uuid.uuid4().hex[:8]}",
                  code=args.code)  # fmt: skip
        rig.tmp.mkdir()
        rig.scripts()
        etcd_root = rig.host("q")
        files_root = base / "quiet" / "files"
        init(files_root)  # this checkout's template, whatever code the hosts run
        for script in (files_root / "sensors").glob("*.sh"):
            script.unlink()
        for root in (etcd_root, files_root):
            (root / "looop.toml").write_text(
                (root / "looop.toml").read_text().replace('backend = "command"', 'backend = "noop"')
            )
        f_ms = quiet_ms(files_root, rig.env("q"), args.quiet)
        e_ms = quiet_ms(etcd_root, rig.env("q"), args.quiet)
        print(
            f"quiet beat (median of {args.quiet}, `looop pulse` wall): files {f_ms:.0f} ms,"
            f" etcd (3 members) {e_ms:.0f} ms: {e_ms / f_ms:.1f}x"
        )
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
