"""What `looop workers` shows: the sessions, how many live, and worktrees kept for their work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from looop_py.workdir.context import WorkDir
from looop_py.workers import reap, records


@dataclass(frozen=True)
class Fleet:
    workers: list[records.SessionView]  # live ones, or every one on disk
    live: int
    max_live: int
    kept_worktrees: list[dict[str, Any]]  # kept for sessions that are not live

    def to_json(self) -> dict[str, Any]:
        return {
            "workers": [v.to_json() for v in self.workers],
            "live": self.live,
            "max_live": self.max_live,
            "kept_worktrees": self.kept_worktrees,
        }


def fleet(wd: WorkDir, now: float, *, include_ended: bool = False) -> Fleet:
    config = wd.config
    views = records.list_sessions(wd, now)
    live = {v.id for v in views if v.alive}
    kept = [k for k in reap.kept_worktrees(wd.paths, config) if k["id"] not in live]
    shown = views if include_ended else [v for v in views if v.alive]
    return Fleet(shown, len(live), config.workers.max_live, kept)
