"""Benchmark (a): the quiet beat — 8 trivial sensors, 100 goals, world unchanged.

Reports the wall time of `looop pulse` on an unchanged world beside a plain bash
loop that runs the same 8 sensors one after another and hashes their output.

    python bench/quiet_beat.py [RUNS]
"""

from __future__ import annotations

import subprocess
import sys

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd, summary, time_runs

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


def main() -> None:
    root = fresh_workdir("quiet")
    for i in range(8):
        add_sensor(root, f"s{i}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(100):
        (root / "goals" / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    pulse = [*looop_cmd(), "-C", str(root), "pulse", "-q"]
    subprocess.run(pulse, check=True)  # first beat decides and commits
    check = subprocess.run([*pulse[:-1], "--json"], check=True, capture_output=True, text=True)
    assert '"outcome": "skipped"' in check.stdout, check.stdout

    bash_loop = f'cd "{root}" && for s in sensors/*.sh; do "$s"; done | sha256sum >/dev/null'
    time_runs(pulse, 3)  # warm the page cache
    looop = time_runs(pulse, RUNS)
    bash = time_runs(["bash", "-c", bash_loop], RUNS)
    python = time_runs([sys.executable, "-c", "pass"], RUNS)
    print(f"quiet beat, 8 sensors + 100 goals, {RUNS} runs each")
    print(f"  looop pulse (skipped)        {summary(looop)}")
    print(f"  bash loop, serial + sha256   {summary(bash)}")
    print(f"  python -c pass (floor)       {summary(python)}")
    cleanup(root)


if __name__ == "__main__":
    main()
