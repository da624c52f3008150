"""`looop prune`: the beat's housekeeping run now, reporting everything it removed.

Dead worker sessions go as soon as a beat has settled them (verify run,
worktree disposed), not after [workers] session_ttl_s; decide archives beyond
[limits] runs_keep go; finished rounds older than the keep time move to
rounds/done/. It runs under the pulse lock, so it never races a beat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from looop_py.errors import Busy
from looop_py.locks import PulseLock
from looop_py.loops import store
from looop_py.workdir import journal, runs
from looop_py.workdir.context import WorkDir
from looop_py.workers import reap


@dataclass(frozen=True)
class Pruned:
    sessions_removed: list[str]
    runs_removed: list[str]
    rounds_archived: list[str]
    events: list[dict[str, Any]]  # every housekeeping event, as events.jsonl holds them

    def to_json(self) -> dict[str, Any]:
        return {
            "sessions_removed": self.sessions_removed,
            "runs_removed": self.runs_removed,
            "rounds_archived": self.rounds_archived,
            "events": self.events,
        }


def prune(wd: WorkDir) -> Pruned:

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
    finally:
        lock.release()
    for event in events:
        journal.emit(
            wd, str(event["event"]), now, **{k: v for k, v in event.items() if k != "event"}
        )
    removed = [e["id"] for e in events if e["event"] == "session_pruned"]
    return Pruned(removed, removed_runs, archived, events)
