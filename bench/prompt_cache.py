"""Benchmark: how much of each decide prompt a provider's prompt cache can serve.

Replays a day of beats (one a minute, on a fake clock from 00:00) through the
real pulse in a work dir with realistic churn: a CI sensor that flips now and
then and whose detail carries the time it checked, a queue sensor whose count
moves and whose detail carries the oldest item's age, claims taken and
released, a loop whose rounds start on a cadence, run a maker and a checker
(shell workers) and report, and a human editing a goal once. The decider
answers noop and keeps each prompt.

For each decide after the first it reports the share of the prompt that is a
byte-identical prefix of the previous prompt: of the whole prompt, and of the
stable sections (everything before the first volatile section: WHAT CHANGED,
CHANGED READINGS or PENDING ASKS, whichever comes first). Medians over the day.
Then an estimated cost of the day's decides at list prices, tokens taken as
bytes / 4, 60 output tokens a decide:

  Anthropic (Claude Sonnet 4.5: $3 in, $3.75 cache write (5 min) or $6 (1 h),
  $0.30 cache read, $15 out per million tokens), with cache markers at the ends
  of `prompt.blocks` when the code has them; a hit needs the previous decide
  within the cache's TTL;
  OpenAI-style automatic prefix caching (GPT-4.1: $2 in, $0.50 cached, $8 out):
  the common prefix, in 128-token steps from 1,024 tokens, within 10 minutes.

    python bench/prompt_cache.py [--hours H] [--goals N] [--baseline DIR]

--baseline DIR replays the same day with the looop found in DIR (e.g. a git
worktree of main) in a child process and prints both, before → after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import add_sensor, cleanup, fresh_workdir

STEP_S = 60.0
START = time.mktime((2026, 11, 23, 0, 0, 0, 0, 0, -1))
OUT_TOKENS = 60
VOLATILE = ("=== WHAT CHANGED", "=== CHANGED READINGS", "=== PENDING ASKS")
DONE = '"$LOOOP_BIN" done --summary'
SENSORS = ("ci", "queue", "prs", "disk", "deploys")


def setup(root: Path, goals: int) -> None:
    (root / "PLAYBOOK.md").write_text(
        "# PLAYBOOK\n\n"
        + "".join(
            f"- Rule {i}: keep the service healthy; prefer small reversible steps, and say"
            f" why in the journal (area {i}).\n"
            for i in range(30)
        )
    )
    for i in range(goals):
        (root / "goals" / f"goal-{i:02}.md").write_text(
            f"---\non: [ci, queue]\n---\n# Goal {i}\n\n"
            + f"Keep area {i} in shape: watch the CI status and the queue, start a worker"
            " when something needs hands-on work, ask a human when in doubt.\n" * 6
        )
    maker = f'echo checking; {DONE} "2 stale branches"'
    checker = f'{DONE} "both are real"'
    (root / "goals" / "triage.md").write_text(
        "---\nintent: triage stale branches\nlevel: L1-report\ncadence: every 3h\n"
        f"runtime: shell\nmaker: |\n  {maker}\nchecker: |\n  {checker}\n---\n# triage\n"
    )
    for name in SENSORS:
        add_sensor(root, name, f"cat {root}/state-{name}.json")


def world_at(root: Path, minute: int, now: float) -> None:
    """The sensors' files for this minute: signals move now and then, details every beat."""
    hour = minute / 60
    ci = "red" if int(hour / 1.5) % 4 == 3 else "green"
    work = 8 <= hour < 20
    queue = (minute // 25) % 7 if work else 0
    (root / "state-ci.json").write_text(
        json.dumps({"signal": {"status": ci}, "detail": {"checked_at": now, "run": minute}})
    )
    (root / "state-queue.json").write_text(
        json.dumps({"signal": {"open": queue}, "detail": {"oldest_age_s": minute * 37 % 5000}})
    )
    opened = [n for n in range(100, 112) if (n - 100) * 70 <= minute < (n - 100) * 70 + 300]
    prs = {
        str(n): {
            "title": f"Fix flaky test in area {n % 12} and tidy its fixtures",
            "updated_at": START + (minute // 10) * 600 - n,
            "checks": "pass" if (minute // 15 + n) % 3 else "pending",
            "comments": minute // 20 % 9,
        }
        for n in opened
    }
    (root / "state-prs.json").write_text(json.dumps({"signal": {"open": opened}, "detail": prs}))
    (root / "state-disk.json").write_text(
        json.dumps({"signal": "ok", "detail": {"used_pct": 61 + minute % 97 / 10, "at": now}})
    )
    deploy = f"v1.{minute // 480}"
    (root / "state-deploys.json").write_text(
        json.dumps({"signal": {"live": deploy}, "detail": {"at": START + minute // 480 * 28800}})
    )


def replay(hours: float, goals: int = 12) -> list[tuple[float, str]]:
    """Every decide prompt of the replay, with the fake time it was built at."""
    from looop_py.beat.pulse import beat
    from looop_py.coord import holders, lease
    from looop_py.coord.choose import open_workdir
    from looop_py.deciders.base import Decision
    from looop_py.workdir.paths import Paths

    prompts: list[tuple[float, str]] = []

    class Capture:
        name = "capture"

        def decide(self, request: object) -> Decision:
            prompts.append((clock_now[0], getattr(request, "prompt", "")))
            return Decision(move={"action": "noop", "reason": "bench", "journal": "nothing to do"})

    root = fresh_workdir("cache")
    setup(root, goals)
    paths = Paths(root)
    (root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
    me = holders.own_holder()
    clock_now = [START]
    wd = open_workdir(paths, clock=lambda: clock_now[0])  # once: every beat reads this clock
    try:
        for minute in range(int(hours * 60)):
            now = START + minute * STEP_S
            clock_now[0] = now
            world_at(root, minute, now)
            if minute % 50 == 20:  # a worker takes a claim, and gives it back 35 min later
                lease.claim(wd.paths, f"area-{minute % 3}", me, now=now)
            if minute % 50 == 5 and minute > 50:
                lease.unclaim(wd.paths, f"area-{(minute - 35) % 3}", me, now=now)
            if minute == 14 * 60 and goals:  # a human edits a goal once
                with (root / "goals" / f"goal-{goals // 2:02}.md").open("a") as f:
                    f.write("\nAlso keep its docs current.\n")
            beat(wd, decider=Capture())
            _settle_workers(root)
    finally:
        wd.close()
        cleanup(root)
    return prompts


def _settle_workers(root: Path) -> None:
    """Wait (real time, briefly) for live shell workers, so rounds advance by beats."""
    deadline = time.monotonic() + 5
    for status in (root / "sessions").glob("*/status.json"):
        while time.monotonic() < deadline:
            try:
                if json.loads(status.read_text()).get("state") not in ("starting", "running"):
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.02)


def _common(a: str, b: str) -> int:
    x, y = a.encode(), b.encode()
    n = min(len(x), len(y))
    lo = 0
    while lo < n and x[lo] == y[lo]:
        lo += 1
    return lo


def _stable_len(text: str) -> int:
    data = text.encode()
    cuts = [data.find(("\n" + h).encode()) for h in VOLATILE]
    found = [c + 1 for c in cuts if c >= 0]
    return min(found) if found else len(data)


def _breakpoints(text: str) -> list[int]:
    """Byte offsets where the Anthropic backend puts its cache markers (none if it has none)."""
    try:
        from looop_py.deciders.prompt import blocks
    except ImportError:
        return []
    parts = blocks(text)[:-1]
    ends, at = [], 0
    for part in parts:
        at += len(part.encode())
        ends.append(at)
    return ends


def measure(prompts: list[tuple[float, str]]) -> dict[str, object]:
    whole, stable = [], []
    plain = anth_5m = anth_1h = oai_plain = oai = 0.0
    for i, (t, text) in enumerate(prompts):
        size = len(text.encode())
        tokens = size / 4
        plain += (tokens * 3 + OUT_TOKENS * 15) / 1e6
        oai_plain += (tokens * 2 + OUT_TOKENS * 8) / 1e6
        prev_t, prev = prompts[i - 1] if i else (None, "")
        common = _common(prev, text) if i else 0
        if i:
            whole.append(common / size)
            s = _stable_len(text)
            stable.append(min(common, s) / s if s else 1.0)
        marks = _breakpoints(text)
        for ttl, write in ((300, 3.75), (3600, 6.0)):
            hit = max(
                (m for m in marks if prev_t is not None and t - prev_t <= ttl and m <= common),
                default=0,
            )
            written = (max(marks) - hit) if marks else 0
            cost = ((size - hit - written) * 3 + hit * 0.3 + written * write) / 4 / 1e6
            cost += OUT_TOKENS * 15 / 1e6
            if ttl == 300:
                anth_5m += cost
            else:
                anth_1h += cost
        cached_tok = common / 4 if prev_t is not None and t - prev_t <= 600 else 0
        cached_tok = (cached_tok // 128) * 128 if cached_tok >= 1024 else 0
        oai += ((tokens - cached_tok) * 2 + cached_tok * 0.5 + OUT_TOKENS * 8) / 1e6
    return {
        "decides": len(prompts),
        "median_bytes": statistics.median(len(p.encode()) for _, p in prompts) if prompts else 0,
        "stable_share": statistics.median(stable) if stable else None,
        "whole_share": statistics.median(whole) if whole else None,
        "usd_anthropic_uncached": round(plain, 4),
        "usd_anthropic_cached_5m": round(anth_5m, 4),
        "usd_anthropic_cached_1h": round(anth_1h, 4),
        "usd_openai_uncached": round(oai_plain, 4),
        "usd_openai_cached": round(oai, 4),
        "markers": bool(prompts and _breakpoints(prompts[-1][1])),
    }


def _pct(x: object) -> str:
    return "-" if not isinstance(x, float) else f"{x * 100:5.1f} %"


def report(label: str, m: dict[str, object]) -> None:
    print(f"{label}: {m['decides']} decides, median prompt {m['median_bytes']:.0f} bytes")
    print(
        f"  byte-identical prefix, median: stable sections {_pct(m['stable_share'])},"
        f" whole prompt {_pct(m['whole_share'])}"
    )
    print(
        f"  est. USD/day  Anthropic: uncached ${m['usd_anthropic_uncached']:.4f},"
        f" cached 5 min ${m['usd_anthropic_cached_5m']:.4f},"
        f" cached 1 h ${m['usd_anthropic_cached_1h']:.4f}"
        f"{'' if m['markers'] else ' (no cache markers sent)'}"
    )
    print(
        f"                OpenAI auto: uncached ${m['usd_openai_uncached']:.4f},"
        f" cached ${m['usd_openai_cached']:.4f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--goals", type=int, default=12, help="plain goals besides the loop")
    ap.add_argument("--baseline", help="a looop checkout (e.g. a git worktree of main)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.baseline:
        env = {**os.environ, "PYTHONPATH": str(Path(args.baseline).resolve())}
        argv = [sys.executable, __file__, "--json", "--hours", str(args.hours)]
        argv += ["--goals", str(args.goals)]
        out = subprocess.run(
            argv,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        report(f"before ({args.baseline})", json.loads(out.splitlines()[-1]))
    started = time.monotonic()
    m = measure(replay(args.hours, args.goals))
    if args.json:
        print(json.dumps(m))
        return
    report("after (this tree)" if args.baseline else "this tree", m)
    print(f"  ({args.hours:g} h of beats replayed in {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
