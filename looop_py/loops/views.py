"""What `looop loops` and `looop rounds` report, as typed views."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looop_py.asks import mailbox
from looop_py.errors import UsageError
from looop_py.loops import store, tally
from looop_py.loops.specs import load_loops
from looop_py.loops.store import RoundRow
from looop_py.schedules.book import book_of
from looop_py.spend import ledger

ON_DEMAND_LABEL = "on demand"  # a loop without `cadence:` runs only when started

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir


@dataclass(frozen=True)
class LoopRow:
    """One loop as `looop loops` shows it."""

    name: str
    level: str
    cadence: str
    action: str
    next_fire_ts: float | None
    last_outcome: str | None
    live_round: str | None
    rounds: int
    tokens: int
    held: str | None = None  # "budget": the daily budget is spent, no round starts
    # "held since T: waiting on ask X": its live round waits for a human, so no round starts
    waiting: str | None = None

    @property
    def next_fire(self) -> str | None:
        if self.next_fire_ts is None:
            return None
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.next_fire_ts))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "level": self.level,
            "cadence": self.cadence,
            "action": self.action,
            "next_fire": self.next_fire,
            "next_fire_ts": self.next_fire_ts,
            "last_outcome": self.last_outcome,
            "live_round": self.live_round,
            "rounds": self.rounds,
            "tokens": self.tokens,
            "held": self.held,
            "waiting": self.waiting,
        }


@dataclass(frozen=True)
class LoopsView:
    loops: tuple[LoopRow, ...]
    errors: dict[str, str]  # goal id → why it is not a usable loop

    def to_json(self) -> dict[str, Any]:
        return {"loops": [lp.to_json() for lp in self.loops], "errors": self.errors}


def waiting_line(wd: WorkDir, rows: list[RoundRow]) -> str | None:
    """`held since T: waiting on ask X` for a loop whose live round awaits approval: while
    it waits, its cadence starts no round (a loop never has two at once)."""
    row = next((r for r in rows if r.live and r.ask), None)
    if row is None or row.ask is None:
        return None
    since: float | None = row.started_at
    with contextlib.suppress(UsageError):  # an ask gone missing: the round's start says when
        since = mailbox.get_ask(wd, row.ask).created_at
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(since)) if since else "?"
    return f"held since {when}: waiting on ask {row.ask}"


def held_loops(wd: WorkDir) -> dict[str, str]:
    """Each loop held on an approval ask, and its `held since T: waiting on ask X` line."""
    live = store.rows(wd.shelf, include_done=False)
    out = {}
    for loop in sorted({r.loop for r in live if r.ask and r.loop}):
        line = waiting_line(wd, [r for r in live if r.loop == loop])
        if line and loop:
            out[loop] = line
    return out


def list_rounds(wd: WorkDir, *, include_done: bool) -> list[RoundRow]:
    return store.rows(wd.shelf, include_done=include_done)


def overview(wd: WorkDir, now: float) -> LoopsView:
    specs, errors = load_loops(wd)
    book = book_of(wd).load()
    held = ledger.held(wd, now)
    current = store.kind_rows(wd.shelf, store.LIVE)  # live and recently done
    current.sort(key=lambda r: (r.started_at or 0, r.id))
    archive = tally.archived(wd)  # the archive, summed: not read while it is unchanged
    out = []
    for spec in specs:
        mine = [r for r in current if r.loop == spec.name]
        done = archive.get(spec.name, tally.Tally())
        recent = tally.summed(mine).get(spec.name, tally.Tally())
        lasts = [t for t in (done.last, recent.last) if t is not None]
        timing = book.loops.get(spec.name)
        out.append(
            LoopRow(
                name=spec.name,
                level=spec.level.label,
                cadence=spec.cadence or ON_DEMAND_LABEL,
                action=spec.action_kind,
                next_fire_ts=timing.next_at if timing else None,
                last_outcome=max(lasts)[2] if lasts else None,
                live_round=next((r.id for r in mine if r.live), None),
                rounds=done.rounds + recent.rounds,
                tokens=done.tokens + recent.tokens,
                held=None if held is None or any(r.live for r in mine) else "budget",
                waiting=waiting_line(wd, mine),
            )
        )
    return LoopsView(tuple(out), errors)
