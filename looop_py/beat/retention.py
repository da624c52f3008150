"""The beat's share of retention: history is looked at only when a look is due.

The shelf's `state` record `retention` says when the next look is due: hourly, or the
next beat while a backlog remains. Then the beat deletes at most [retention] per_beat of
what beat/prune.py finds due (its policy, the same `looop prune` applies). A beat with no
look due reads that one record and imports nothing more: prune.py (`looop prune`, its
records) is loaded only for a look.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.workdir import shelf as shelf_mod

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir

STATE = "retention"  # the shelf's `state` record: when the beat looks next
LOOK_EVERY_S = 3600.0  # a beat looks at history at most this often (with no backlog)


def step(wd: WorkDir, now: float) -> list[dict[str, Any]]:
    """When a look is due, delete at most `per_beat` records; one event
    (`history_pruned`) when it deleted any. The next look is due at once while a backlog
    remains, else in an hour."""
    box = wd.shelf
    with contextlib.suppress(Exception):  # an unreadable record: look now, rewrite it after
        record = shelf_mod.read_json(box, "state", STATE, {})
        next_at = jsonio.number(record.get("next_at")) if isinstance(record, dict) else None
        if next_at is not None and now < next_at:
            return []
    from looop_py.beat.prune import delete, due  # only for a look: hourly, or a backlog

    limit = wd.config.retention.per_beat
    expired = due(wd, now)
    gone = delete(wd, expired[:limit])
    backlog = len(expired) > limit
    next_at = now if backlog else now + LOOK_EVERY_S
    shelf_mod.write_json(box, "state", STATE, {"v": 1, "next_at": next_at})
    if not gone:
        return []
    counts: dict[str, int] = {}
    for e in gone:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    return [{"event": "history_pruned", "removed": counts, "backlog": backlog}]
