"""What one beat returns: its outcome, what changed, how each sensor did."""

from __future__ import annotations

import enum
from dataclasses import field
from typing import Any

from looop_py.records import record
from looop_py.sensing.sensors import Reading
from looop_py.world import Change


class BeatOutcome(enum.StrEnum):
    """How a beat ended. Exit code 1 only for FAILED; cron is quiet unless it acted."""

    SKIPPED = "skipped"  # the world is unchanged: no decider call, no cost
    DECIDED = "decided"  # a move was made and the world committed
    FAILED = "failed"  # the decide or the move failed; the next beat tries again
    HELD = "held"  # a spend limit or backoff kept the decider from being called
    LOCKED = "locked"  # another pulse is running; this one stepped aside


# @record: nothing compares these (identity) or assigns to them (mypy); each generated
# method is a full beat's fixed cost at import (records.py).
@record(slots=True)
class BeatResult:
    """One beat as `looop pulse --json` and the events log report it."""

    outcome: BeatOutcome
    world_hash: str | None = None
    prev_hash: str | None = None
    changed: tuple[Change, ...] = ()
    readings: tuple[Reading, ...] = ()
    duration_s: float = 0.0
    move: Any = None
    journal: str | None = None
    reason: str | None = None
    forced: bool = False
    forced_by: str | None = None  # force | next-interval | noop-ttl
    decide: dict[str, Any] = field(default_factory=dict)  # backend, ms, tokens, cost, run
    failed_steps: tuple[str, ...] = ()  # steps that raised (a bug); the beat went on
    # A shared backend stopped this beat: etcd out of reach (since when), or the pulse lost
    # mid-beat (at which token). `looop pulse` exits 3 with this line on stderr.
    cut_off: str | None = None
    # Another host holds the shared pulse (this beat stepped aside): {host, since, token}.
    held_by: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "world_hash": self.world_hash,
            "prev_hash": self.prev_hash,
            "forced": self.forced,
            "forced_by": self.forced_by,
            "changed": [c.to_json() for c in self.changed],
            "sensors": {
                r.stem.removeprefix("sensor-"): {
                    "status": r.status,
                    "ms": round(r.duration_s * 1000, 1),
                    **({} if r.ok else {"error": r.error_code}),
                }
                for r in self.readings
            },
            "move": self.move,
            "journal": self.journal,
            "reason": self.reason,
            "decide": self.decide,
            "ms": round(self.duration_s * 1000, 1),
            **({"failed_steps": list(self.failed_steps)} if self.failed_steps else {}),
            **({"cut_off": self.cut_off} if self.cut_off else {}),
            **({"held_by": self.held_by} if self.held_by else {}),
        }
