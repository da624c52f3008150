"""Benchmark: a year of history against a fresh work dir (issue #26, item 5).

Builds three work dirs with the same goals, sensors and loop:

- **fresh**: no history;
- **year**: a simulated year written through the real code with old timestamps —
  17 finished rounds a day in rounds/done/ and 5 answered asks a day (the issue's
  month had ~17 rounds a day) — with [retention] set to keep it all (what a beat
  costs with the history indexed but never deleted);
- **kept**: the same year after `looop prune`, i.e. what [retention] keeps (by
  default 30 days and at most 500 of each kind; a beat converges there per_beat
  deletions at a time).

Then times, interleaved round by round, in each: a quiet beat (`looop pulse`), a
full beat (`looop pulse --force`, which runs check-records and the retention step),
`looop loops`, `looop rounds` and `looop rounds --all`; prints each median with its
ratio to the fresh work dir of the same run, and each work dir's file count.

    python bench/history.py [RUNS] [DAYS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import add_sensor, cleanup, fresh_workdir, looop_cmd

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
DAYS = int(sys.argv[2]) if len(sys.argv) > 2 else 365
ROUNDS_A_DAY, ASKS_A_DAY = 17, 5
DAY = 86400.0

LOOP = """---
intent: sweep the repo
level: L1-report
runtime: shell
maker: |
  echo looking
checker: |
  echo checked
---
# sweep
"""


def workdir(name: str) -> Path:
    root = fresh_workdir(f"history-{name}")
    for i in range(8):
        add_sensor(root, f"s{i}", f'echo \'{{"signal": {{"n": {i}}}, "detail": {{}}}}\'')
    for i in range(100):
        (root / "goals" / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    (root / "goals" / "sweep.md").write_text(LOOP)
    return root


def write_year(root: Path, days: int) -> None:
    """`days` of finished rounds and answered asks, through the real code, dated in the past."""
    from looop_py.asks import mailbox
    from looop_py.coord.choose import open_workdir
    from looop_py.engine.report import RoundOutcome
    from looop_py.engine.rounds import Phase, RoundState
    from looop_py.engine.spec import LoopSpec
    from looop_py.loops import store
    from looop_py.workdir.paths import Paths

    wd = open_workdir(Paths(root))
    spec = LoopSpec.from_dict({"name": "sweep", "intent": "sweep the repo", "level": "L1"})
    rounds = store.rounds_of(wd)
    now = time.time()
    for day in range(days, 0, -1):
        for i in range(ROUNDS_A_DAY):
            ended = now - day * DAY + i * (DAY / ROUNDS_A_DAY)
            state = RoundState(
                id=f"sweep-d{day:03}-{i:02}",
                spec=spec,
                phase=Phase.DONE,
                started_at=ended - 120,
                updated_at=ended,
                ended_at=ended,
                outcome=RoundOutcome.REPORTED,
                input_tokens=1200,
                output_tokens=300,
            )
            rounds.save(state)
            wd.shelf.move(store.LIVE, state.id, store.ARCHIVE)
        for i in range(ASKS_A_DAY):
            at = now - day * DAY + i * (DAY / ASKS_A_DAY)
            ask = mailbox.open_ask(wd, prompt=f"ship fix {day}-{i}?", asker="decider", now=at)
            mailbox.answer(wd, ask.id, "yes", now=at + 60)
    wd.close()


def files(root: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(root))


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    looop = looop_cmd()
    roots = {name: workdir(name) for name in ("fresh", "year", "kept")}
    built = time.perf_counter()
    for name in ("year", "kept"):
        write_year(roots[name], DAYS)
    keep_all = "[retention]\n" + "".join(
        f"{kind}_s = 315360000\n{kind}_keep = 100000\n" for kind in ("rounds", "asks", "forged")
    )
    toml = roots["year"] / "looop.toml"
    toml.write_text(toml.read_text().replace("[retention]\n", keep_all, 1))
    print(f"wrote {DAYS} days of history twice in {time.perf_counter() - built:.1f} s")
    counts = {name: files(root) for name, root in roots.items()}
    subprocess.run([*looop, "-C", str(roots["kept"]), "prune"], check=True, capture_output=True)
    for root in roots.values():  # the first beat decides and seals; the next is quiet
        subprocess.run([*looop, "-C", str(root), "pulse", "-q", "--force"], check=True)
        subprocess.run([*looop, "-C", str(root), "pulse", "-q"], check=True)
    commands = {
        "quiet beat": ["pulse", "-q"],
        "full beat": ["pulse", "-q", "--force"],
        "looop loops": ["loops"],
        "looop rounds": ["rounds"],
        "looop rounds --all": ["rounds", "--all"],
    }
    times: dict[tuple[str, str], list[float]] = {
        (cmd, name): [] for cmd in commands for name in roots
    }
    for _ in range(2 + RUNS):  # the first 2 rounds warm the page cache and are dropped
        for cmd, args in commands.items():
            for name, root in roots.items():
                times[(cmd, name)].append(timed([*looop, "-C", str(root), *args]))
    median = {key: statistics.median(samples[2:]) for key, samples in times.items()}
    print(f"{DAYS} days of history, {RUNS} interleaved runs each; median ms (× fresh)")
    print(f"  {'':<20}" + "".join(f"{name:>22}" for name in roots))
    for cmd in commands:
        base = median[(cmd, "fresh")]
        cells = "".join(
            f"{median[(cmd, n)] * 1000:>12.1f} (×{median[(cmd, n)] / base:4.2f})" for n in roots
        )
        print(f"  {cmd:<20}{cells}")
    after = {name: files(root) for name, root in roots.items()}
    print("  files: " + ", ".join(f"{n} {counts[n]} → {after[n]}" for n in roots))
    for root in roots.values():
        cleanup(root)


if __name__ == "__main__":
    main()
