"""`looop prune`: the beat's housekeeping run now, reporting everything it removed.

Dead worker sessions go as soon as a beat has settled them (verify run,
worktree disposed), not after [workers] session_ttl_s; decide archives beyond
[limits] runs_keep go; finished rounds older than the keep time move to
rounds/done/; history past its [retention] goes, all of it (a beat deletes
only [retention] per_beat at a time). It runs under the pulse lock, so it never
races a beat. `dry_run` changes nothing and says what would go.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from looop_py.beat import retention
from looop_py.errors import Busy
from looop_py.locks import PulseLock
from looop_py.loops import store
from looop_py.workdir import journal, runs
from looop_py.workdir.context import WorkDir
from looop_py.workers import reap, records


@dataclass(frozen=True)
class Pruned:
    sessions_removed: list[str]
    runs_removed: list[str]
    rounds_archived: list[str]
    events: list[dict[str, Any]]  # every housekeeping event, as events.jsonl holds them
    history_removed: list[retention.Expired] = field(default_factory=list)
    dry_run: bool = False  # nothing was removed: the lists say what would have gone

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "sessions_removed": self.sessions_removed,
            "runs_removed": self.runs_removed,
            "rounds_archived": self.rounds_archived,
            "history_removed": [e.to_json() for e in self.history_removed],
            "events": self.events,
        }


def prune(wd: WorkDir, *, dry_run: bool = False) -> Pruned:
    """Housekeeping now; with `dry_run` only what it would remove (no lock, no writes)."""
    if dry_run:
        return would_prune(wd)
    cfg = wd.config
    wd.paths.state.mkdir(exist_ok=True)
    lock = PulseLock(wd.paths.pulse_lock)
    if not lock.acquire(timeout_s=cfg.sensors.timeout_s + 5):
        raise Busy("a pulse has held the lock for too long", "try again in a minute")
    try:
        now = wd.clock()
        events = reap.housekeeping(wd, now, ttl_s=0)
        removed_runs = runs.prune(wd.paths, cfg.limits.runs_keep)
        archived = store.archive_done(wd.shelf, now)
        history = retention.delete(wd, retention.due(wd, now))
    finally:
        lock.release()
    for event in events:
        journal.emit(
            wd, str(event["event"]), now, **{k: v for k, v in event.items() if k != "event"}
        )
    if history:
        journal.emit(wd, "history_pruned", now, removed=_counts(history), backlog=False)
    removed = [e["id"] for e in events if e["event"] == "session_pruned"]
    return Pruned(removed, removed_runs, archived, events, history)


def would_prune(wd: WorkDir) -> Pruned:
    """What `prune` would remove now, read without the lock and without writing anything.

    Sessions: those a beat has settled (finalized) whose worker is gone; a session
    still to be settled is settled first by a real prune and may go then too.
    """
    now = wd.clock()
    sessions = [d.name for d in records.session_dirs(wd.paths) if reap.settled(d)]
    keep = wd.config.limits.runs_keep
    try:
        run_dirs = sorted(p.name for p in wd.paths.runs.iterdir() if p.is_dir())
    except FileNotFoundError:
        run_dirs = []
    old_runs = run_dirs[:-keep] if keep > 0 else []
    archived = store.to_archive(wd.shelf, now)
    return Pruned(sessions, old_runs, archived, [], retention.due(wd, now), dry_run=True)


def _counts(gone: list[retention.Expired]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in gone:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    return counts
