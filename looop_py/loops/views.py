"""What `looop loops` and `looop rounds` report, as typed views."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.errors import UsageError
from looop_py.loops import store
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
    """Live rounds (with include_done the archived ones too, from their cache), oldest first."""
    if not include_done or wd.shelf.shared:
        return store.rows(wd.shelf, include_done=include_done)
    found = [*store.kind_rows(wd.shelf, store.LIVE), *archived_rows(wd)]
    found.sort(key=lambda r: (r.started_at or 0, r.id))
    return found


def overview(wd: WorkDir, now: float) -> LoopsView:
    specs, errors = load_loops(wd)
    book = book_of(wd).load()
    held = ledger.held(wd, now)
    current = store.kind_rows(wd.shelf, store.LIVE)  # live and recently done
    current.sort(key=lambda r: (r.started_at or 0, r.id))
    archive = archived_tally(wd)  # the archive, summed: not read while it is unchanged
    out = []
    for spec in specs:
        mine = [r for r in current if r.loop == spec.name]
        done = archive.get(spec.name, Tally())
        recent = summed(mine).get(spec.name, Tally())
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


# -- each loop's archived rounds, summed ----------------------------------------------------
#
# Each loop's archived rounds summed up, so `looop loops` never reads the archive.
#
# rounds/done/ changes only by whole files moved in (a beat archives a round an hour
# after it ended) or deleted ([retention]), and each such change moves the folder's
# mtime. state/rounds-tally.json keeps, with the folder's stat, each loop's archived
# round count, tokens and newest outcome; while the stat holds, `looop loops` reads
# that one file instead of every archived round (a cache: one that does not fit is
# summed afresh). A shared shelf has no folder to stat: it sums the rows each time.


TALLY = "rounds-tally.json"  # in state/
ROWS = "rounds-done-rows.json"  # in state/: each archived round's row, for `looop rounds --all`
SETTLE_S = 2.0  # a folder changed this recently may change again within its mtime's tick


@dataclass(frozen=True, slots=True)
class Tally:
    rounds: int = 0
    tokens: int = 0
    last: tuple[float, str, str] | None = None  # (started_at, id, outcome) of the newest

    def to_json(self) -> list[Any]:
        return [self.rounds, self.tokens, list(self.last) if self.last else None]


def summed(rows: Iterable[RoundRow]) -> dict[str, Tally]:
    """Each loop's rounds counted, their tokens added, the newest with an outcome. Pure."""
    out: dict[str, Tally] = {}
    for r in rows:
        if r.loop is None:
            continue
        t = out.get(r.loop, Tally())
        last = t.last
        if r.outcome and (last is None or (r.started_at or 0.0, r.id) > last[:2]):
            last = (r.started_at or 0.0, r.id, r.outcome)
        out[r.loop] = Tally(t.rounds + 1, t.tokens + r.tokens, last)
    return out


def archived_tally(wd: WorkDir) -> dict[str, Tally]:
    """Each loop's tally of rounds/done/, from the cache while the folder is unchanged."""
    if wd.shelf.shared:
        return summed(store.kind_rows(wd.shelf, store.ARCHIVE))
    stamp = _archive_stamp(wd)
    if stamp is None:
        return {}
    cache = wd.paths.state / TALLY
    kept = _read_tally(cache, stamp)
    if kept is not None:
        return kept
    tallies = summed(store.kind_rows(wd.shelf, store.ARCHIVE))
    record = {"v": 1, "stamp": stamp, "loops": {k: t.to_json() for k, t in tallies.items()}}
    _keep(cache, stamp, record)
    return tallies


def archived_rows(wd: WorkDir) -> list[RoundRow]:
    """Every archived round's row (files shelf), from the cache while rounds/done/ is
    unchanged: `looop rounds --all` lists them without reading each round."""
    stamp = _archive_stamp(wd)
    if stamp is None:
        return []
    cache = wd.paths.state / ROWS
    kept = _read_rows(cache, stamp)
    if kept is not None:
        return kept
    rows = store.kind_rows(wd.shelf, store.ARCHIVE)
    record = {"v": 1, "stamp": stamp, "rows": [[getattr(r, f) for f in ROW_FIELDS] for r in rows]}
    _keep(cache, stamp, record)
    return rows


def _archive_stamp(wd: WorkDir) -> list[int] | None:
    """rounds/done/'s stat, taken before its rounds are read (a change after it makes
    the stamp stale, so the next reader sums afresh); None when there is no archive."""
    try:
        st = (wd.paths.rounds / "done").stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _keep(cache: Any, stamp: list[int], record: dict[str, Any]) -> None:
    """Write a cache of the archive, unless the folder changed too lately to trust its tick."""
    if time.time() - stamp[0] / 1e9 >= SETTLE_S:
        with contextlib.suppress(OSError):
            jsonio.write_json(cache, record, durable=False)


ROW_FIELDS = tuple(RoundRow.__dataclass_fields__)
_TEXTS = ("loop", "outcome", "trigger", "ask", "error", "host")


def _cached(cache: Any, stamp: list[int], key: str) -> Any:
    """A cache of the archive's `key`, only if it was written for the folder as it is now
    (its stamp); None for a cache that is missing, damaged, stale or another version's."""
    try:
        data = jsonio.read_json(cache)
    except Exception:
        return None
    if not isinstance(data, dict) or data.get("v") != 1 or data.get("stamp") != stamp:
        return None
    return data.get(key)


def _read_rows(cache: Any, stamp: list[int]) -> list[RoundRow] | None:
    rows = _cached(cache, stamp, "rows")
    if not isinstance(rows, list):
        return None
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == len(ROW_FIELDS)):
            return None
        f = dict(zip(ROW_FIELDS, row, strict=True))
        if not (isinstance(f["id"], str) and isinstance(f["phase"], str) and _count(f["tokens"])):
            return None
        if not all(f[k] is None or isinstance(f[k], str) for k in _TEXTS):
            return None
        for k in ("started_at", "ended_at"):
            if f[k] is not None:
                f[k] = jsonio.number(f[k])
                if f[k] is None:
                    return None
        out.append(RoundRow(**f))
    return out


def _read_tally(cache: Any, stamp: list[int]) -> dict[str, Tally] | None:
    loops = _cached(cache, stamp, "loops")
    if not isinstance(loops, dict):
        return None
    out: dict[str, Tally] = {}
    for name, row in loops.items():
        if not (isinstance(row, list) and len(row) == 3):
            return None
        rounds, tokens, last = row
        if not (_count(rounds) and _count(tokens)):
            return None
        if last is not None:
            ok = isinstance(last, list) and len(last) == 3
            if (
                not ok
                or jsonio.number(last[0]) is None
                or not all(isinstance(x, str) for x in last[1:])
            ):
                return None
            last = (float(last[0]), last[1], last[2])
        out[name] = Tally(rounds, tokens, last)
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
