"""The quiet beat's own instructions (valgrind callgrind's Ir), beside the floor and start-up.

Wall and CPU times move with the machine's load; an instruction count does not. This
counts the instructions of the looop process alone (its sensors are not traced, nor
the floor's), so it measures what looop itself adds to a quiet beat, to the digit,
on a machine the other benchmarks share:

- `looop pulse -q` on a sealed work dir (8 sensors, 100 goals), through the launcher;
- bench/floor.py on the same work dir (posix_spawn + xxh3, no teardown skipped), and
  `floor.py --lean` (its sensors' NAME exec'd at once and its teardown skipped, as looop's);
- `python -c pass` and `python -S -c pass` (start-up with and without `site`).

    python bench/quiet_instructions.py [OTHER_LOOOP ...]

OTHER_LOOOP: other installs' `looop` (say main's), each on a sealed work dir of its own.
Needs valgrind. A beat that was not quiet is reported and not counted.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from _common import cleanup, looop_cmd
from quiet_beat import sealed_workdir


def instructions(argv: list[str]) -> int:
    """Ir of the process argv starts (its children untraced)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(re.findall(r"Collected : (\d+)", done.stderr)[0])


def quiet_count(launcher: list[str]) -> tuple[Path, int]:
    """A sealed work dir for this launcher and the Ir of a quiet beat in it. The seal
    covers the environment's names, which valgrind adds to: a first beat under it seals."""
    root, pulse = sealed_workdir(launcher)
    for _ in range(2):
        instructions(pulse)
    count = instructions(pulse)
    last = (root / "events.jsonl").read_text().splitlines()[-1]
    if '"sealed":true' not in last:
        raise SystemExit(f"{launcher}: the beat was not quiet: {last}")
    return root, count


def main() -> None:
    launchers = [looop_cmd(), *([other] for other in sys.argv[1:])]
    counts: dict[str, int] = {}
    roots = []
    for launcher in launchers:
        root, counts[f"looop pulse -q ({launcher[0]})"] = quiet_count(launcher)
        roots.append(root)
    floor = str(Path(__file__).with_name("floor.py"))
    counts["floor: posix_spawn + xxh3"] = instructions([sys.executable, floor, str(roots[0])])
    lean = [sys.executable, floor, "--lean", str(roots[0])]
    counts["floor --lean (no env, _exit)"] = instructions(lean)
    counts["python -c pass"] = instructions([sys.executable, "-c", "pass"])
    counts["python -S -c pass"] = instructions([sys.executable, "-S", "-c", "pass"])
    base = counts["floor: posix_spawn + xxh3"]
    print("instructions of the process itself (callgrind Ir; children untraced)")
    for name, count in counts.items():
        print(f"  {name[-60:]:60} {count / 1e6:8.2f} M   ÷ floor {count / base:5.2f}")
    for root in roots:
        cleanup(root)


if __name__ == "__main__":
    main()
