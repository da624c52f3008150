"""Benchmark (c): a sensor that prints 200 MB — looop's peak memory stays flat.

Measures the peak RSS of the `looop pulse` process (os.wait4's ru_maxrss, which
on Linux is in KiB) and the wall time of the beat.

    python bench/big_output.py [MEGABYTES]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd

MB = int(sys.argv[1]) if len(sys.argv) > 1 else 200


def peak_rss_kib(argv: list[str]) -> tuple[int, float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_maxrss, time.perf_counter() - start, os.waitstatus_to_exitcode(status)


def main() -> None:
    root = fresh_workdir("big")
    add_sensor(root, "flood", f"head -c {MB * 1024 * 1024} /dev/zero")
    pulse = [*looop_cmd(), "-C", str(root), "pulse", "-q"]
    baseline_root = fresh_workdir("tiny")
    add_sensor(baseline_root, "tiny", "echo 1")
    base_kib, _, _ = peak_rss_kib([*looop_cmd(), "-C", str(baseline_root), "pulse", "-q"])
    kib, secs, rc = peak_rss_kib(pulse)
    snap = (root / "snapshots" / "sensor-flood.json").read_text()
    assert '"too-large"' in snap, snap
    print(f"sensor printing {MB} MB (cap 8192 bytes), exit {rc}")
    print(f"  looop pulse peak RSS         {kib / 1024:7.1f} MB   (beat took {secs:.2f} s)")
    print(f"  same beat, 1-line sensor     {base_kib / 1024:7.1f} MB")
    cleanup(root)
    cleanup(baseline_root)


if __name__ == "__main__":
    main()
