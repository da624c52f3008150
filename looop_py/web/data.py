"""What the page shows, as plain JSON-ready dicts built from the core views (no web stack).

Each function mirrors a CLI `--json` shape where one exists (`status`, `asks`,
`workers`, `loops`, `rounds`, `journal`), adding only what a page needs on top
(the beats of the last day, spend per day, what an approval would run).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from looop_py import __version__
from looop_py.asks import inbox, mailbox
from looop_py.beat import views as beat_views
from looop_py.errors import LooopError
from looop_py.ids import is_safe_segment
from looop_py.loops import views as loop_views
from looop_py.moves import union
from looop_py.spend import ledger
from looop_py.workdir import journal
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workers import fleet, logs, records

OUTCOMES = ("decided", "skipped", "held", "failed", "locked")
EVENT_SCAN = 20000  # events.jsonl lines read for the charts (about a day at one beat a minute)
RUN_FILES = ("prompt.md", "output.txt", "move.json", "error.txt")
FILE_CAP = 64 * 1024  # bytes of one archived file shown on a page


def beat_events(paths: Paths, since: float) -> list[dict[str, Any]]:
    """Beat events newer than `since`, oldest first, each with its Unix time as `t`."""
    out = []
    for e in journal.recent_events(paths, EVENT_SCAN):
        if e.get("event") != "beat":
            continue
        t = journal.from_iso(e.get("ts"))
        if t is not None and t >= since:
            out.append({**e, "t": t})
    return out


def spend_by_day(wd: WorkDir, now: float, days: int = 7) -> list[dict[str, Any]]:
    """Tokens and USD per local day from the ledger, every source (decides, loop rounds,
    workers) as the daily budget counts them. A day the ledger kept no totals for (before it
    kept history) is summed from the beats' decide stats: `sources` says "decider" then."""
    names = [time.strftime("%Y-%m-%d", time.localtime(now - 86400 * i)) for i in range(days)]
    spend = ledger.today(ledger.load(wd), now)
    kept = {**spend.past, spend.day: spend.totals()}
    totals: dict[str, dict[str, Any]] = {}
    for d in reversed(names):
        got = kept.get(d)
        totals[d] = {"day": d, "tokens": 0, "usd": 0.0, "decides": 0, "sources": "decider"}
        if got is not None:
            totals[d].update(
                tokens=int(got.get("tokens") or 0),
                usd=float(got.get("usd") or 0.0),
                by_source=got.get("by_source") or {},
                sources="all",
            )
    for e in beat_events(wd.paths, now - 86400 * days):
        day = time.strftime("%Y-%m-%d", time.localtime(e["t"]))
        stats = e.get("decide") if isinstance(e.get("decide"), dict) else None
        if day not in totals or not stats:
            continue
        row = totals[day]
        row["decides"] += 1
        if row["sources"] == "all":
            continue  # the ledger has the day: decides and everything else, once
        for key in ("input_tokens", "output_tokens"):
            if isinstance(stats.get(key), int):
                row["tokens"] += stats[key]
        if isinstance(stats.get("cost_usd"), int | float):
            row["usd"] = round(row["usd"] + stats["cost_usd"], 6)
    return list(totals.values())


def overview(wd: WorkDir, now: float, days: int = 1) -> dict[str, Any]:
    """`looop status --json`, plus the last `days` of beats, wake ratio, spend, workers, rounds,
    asks."""
    cfg = wd.config
    beats = beat_events(wd.paths, now - 86400 * days)
    counts = {o: sum(1 for b in beats if b.get("outcome") == o) for o in OUTCOMES}
    woke = sum(counts[o] for o in ("decided", "held", "failed"))
    ran = woke + counts["skipped"]
    return {
        "status": beat_views.status(wd).to_json(),
        "days": days,
        "beats": [
            {
                "ts": b.get("ts"),
                "t": b["t"],
                "outcome": b.get("outcome"),
                "decided": move_summary(b.get("move")),
            }
            for b in beats
        ],
        "counts": counts,
        "wake_ratio": round(woke / ran, 3) if ran else None,
        "spend": spend_by_day(wd, now),
        "budget": {"daily_tokens": cfg.limits.daily_tokens, "daily_usd": cfg.limits.daily_usd},
        "workers": fleet.fleet(wd, now).to_json(),
        "rounds": [r.to_json() for r in loop_views.list_rounds(wd, include_done=False)],
        "asks": asks(wd, now)["asks"],
    }


def move_summary(move: Any) -> str | None:
    """A move as its journal line would name it (None when the beat decided nothing)."""
    if not isinstance(move, dict):
        return None
    try:
        return union.parse(move).summary()
    except union.MoveError:
        return str(move.get("action", "?"))


def beat(paths: Paths, ts: str) -> dict[str, Any] | None:
    """One beat event by its ts, with its decide archive (runs/<id>/) when it has one."""
    found = next(
        (
            e
            for e in reversed(journal.recent_events(paths, EVENT_SCAN))
            if e.get("event") == "beat" and e.get("ts") == ts
        ),
        None,
    )
    if found is None:
        return None
    run: dict[str, str] = {}
    stats = found.get("decide")
    run_id = stats.get("run") if isinstance(stats, dict) else None
    if isinstance(run_id, str) and is_safe_segment(run_id):
        for name in RUN_FILES:
            text = read_capped(paths.runs / run_id / name)
            if text is not None:
                run[name] = text
    return {"beat": found, "explanation": _explain(found), "run_id": run_id, "run": run}


def _explain(event: dict[str, Any]) -> str:
    last = beat_views.LastBeat.from_event(event)
    return beat_views.explain(last) if last else ""


def read_capped(path: Path, cap: int = FILE_CAP) -> str | None:
    try:
        with path.open("rb") as f:
            data = f.read(cap + 1)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    text = data[:cap].decode("utf-8", "replace")
    return text + ("\n… (cut at 64 KiB)" if len(data) > cap else "")


def would_run(ask: mailbox.Ask) -> dict[str, Any] | None:
    """What approving this ask would run, exactly as the gate recorded it in the ask."""
    if ask.kind is not mailbox.AskKind.APPROVAL:
        return None
    move = ask.hold.get("move")
    runs = ask.hold.get("runs")
    if isinstance(move, dict):
        return {
            "action": str(move.get("action", "?")),
            "text": runs if isinstance(runs, str) else None,
            "file": ask.hold.get("file"),
            "move": move,
        }
    return {"action": "round", "text": None, "file": None, "move": ask.hold}


def asks(wd: WorkDir, now: float) -> dict[str, Any]:
    """`looop asks --json` (each with its state: pending, stranded, expired), each approval
    with what it would run."""
    return {
        "asks": [
            {
                **v.ask.to_json(),
                "age_s": round(now - v.ask.created_at),
                "state": v.state.value,
                "why": v.why,
                "would_run": would_run(v.ask),
            }
            for v in mailbox.listing(wd)
        ]
    }


def workers(wd: WorkDir, now: float, *, include_ended: bool = True) -> dict[str, Any]:
    """`looop workers --all --json`."""
    return fleet.fleet(wd, now, include_ended=include_ended).to_json()


def worker(wd: WorkDir, worker_id: str, now: float, lines: int = 200) -> dict[str, Any] | None:
    """One worker: its view, the tail of output.log, and the messages told to it."""
    if not is_safe_segment(worker_id):
        return None
    view = next((v for v in records.list_sessions(wd, now) if v.id == worker_id), None)
    if view is None:
        return None
    try:
        tail = b"".join(logs.read_log(wd, worker_id, last=lines)).decode("utf-8", "replace")
    except LooopError:
        tail = ""
    return {"worker": view.to_json(), "log_tail": tail, "told": inbox.messages(wd.paths, worker_id)}


def loops(wd: WorkDir, now: float) -> dict[str, Any]:
    """`looop loops --json` and `looop rounds --all --json` together."""
    return {
        **loop_views.overview(wd, now).to_json(),
        "rounds": [r.to_json() for r in loop_views.list_rounds(wd, include_done=True)],
    }


def journal_lines(paths: Paths, query: str = "", n: int = 500) -> dict[str, Any]:
    """The newest journal lines first; with a query, only lines holding it (any case)."""
    lines = list(reversed(journal.tail(paths, 5000 if query else n)))
    if query:
        q = query.lower()
        lines = [line for line in lines if q in line.lower()][:n]
    return {"lines": lines, "query": query}


def snapshot(wd: WorkDir) -> dict[str, Any]:
    """Everything `looop report --html` shows, read once."""
    now = time.time()
    return {
        "now": now,
        "overview": overview(wd, now),
        "journal": journal_lines(wd.paths, n=50),
        "generated": journal.iso(now),
        "work_dir": str(wd.paths.root),
        "version": __version__,
    }
