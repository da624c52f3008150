"""`looop prune` and retention: the beat's housekeeping run now, and the history that goes.

`prune`: dead worker sessions go as soon as a beat has settled them (verify run,
worktree disposed), not after [workers] session_ttl_s; decide archives beyond
[limits] runs_keep go; finished rounds older than the keep time move to
rounds/done/; history past its [retention] goes, all of it. It runs under the pulse
lock, so it never races a beat. `dry_run` changes nothing and says what would go.

Retention ([retention]): the history records that only grow, and when each goes:

    rounds-done  a finished round (rounds/done/<id>.json), by when it ended
    asks         an answered or expired ask and its answer, by when it was answered
    forged       a refused forgery (state/forged/), by when it was refused

A record goes once it is older than its kind's `_s` or beyond the newest `_keep`
(`pick`, pure). Some always stay, whatever their age: a round `state/round-reports`
names (the decider still hears of it), an ask a live round waits on or an approval
still to be carried out names, and the newest ask of each asker (ids count up from the
highest one there, so a pruned id is never handed out again). Everything else the
page, the reports and `looop rounds --all` show lies within what is kept.

`looop prune` deletes all that is due (`--dry-run` only lists it); a beat deletes at
most `per_beat` of them, only when a look is due (beat/retention.py), so a beat never
reads history it does not need. Deletion goes through the shelf: files or etcd alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.errors import Busy
from looop_py.locks import PulseLock
from looop_py.records import record
from looop_py.workdir import journal
from looop_py.workdir import shelf as shelf_mod

if TYPE_CHECKING:
    from looop_py.workdir.config import RetentionConfig
    from looop_py.workdir.context import WorkDir


@dataclass(frozen=True, slots=True)
class Expired:
    """One record retention removes: its kind, name, when it was made history, and why."""

    kind: str  # rounds-done | asks | forged
    name: str
    at: float | None  # ended / answered / refused; None when the record does not say
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "at": self.at, "why": self.why}


def pick(
    rows: list[tuple[str, float | None]],
    now: float,
    *,
    keep_s: float,
    keep: int,
    protected: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """(name, why) of each row to delete, oldest first. Pure.

    `rows` are (name, when it became history); a row with no time counts as oldest
    (it cannot prove it is young). Protected rows are never picked and count towards
    `keep` like the rest (they are kept, after all).
    """
    ordered = sorted(rows, key=lambda r: (r[1] if r[1] is not None else float("-inf"), r[0]))
    beyond = len(ordered) - keep
    out: list[tuple[str, str]] = []
    for i, (name, at) in enumerate(ordered):
        if name in protected:
            continue
        if at is None or now - at > keep_s:
            out.append((name, f"older than {_days(keep_s)}"))
        elif i < beyond:
            out.append((name, f"beyond the newest {keep}"))
    return out


def _days(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:g} days" if days >= 1 else f"{seconds:g} s"


# -- what each kind holds ---------------------------------------------------------------------


def _rounds(wd: WorkDir) -> tuple[list[tuple[str, float | None]], frozenset[str]]:
    from looop_py.loops import store  # rounds' records: `looop prune` and the hourly look only

    rows = [
        (name, jsonio.number(data.get("ended_at")) if isinstance(data, dict) else None)
        for name, data in shelf_mod.json_items(wd.shelf, store.ARCHIVE)
    ]
    return rows, frozenset(store.reports(wd.shelf).values())


def _asks(wd: WorkDir) -> tuple[list[tuple[str, float | None]], frozenset[str]]:
    """Answered asks (by answered_at; an answer whose ask is gone too) and expired ones."""
    from looop_py.loops import store  # rounds' records: `looop prune` and the hourly look only

    box = wd.shelf
    answered: dict[str, float | None] = {}
    for name, data in shelf_mod.json_items(box, "answers"):
        answered[name] = jsonio.number(data.get("answered_at")) if isinstance(data, dict) else None
    rows = dict(answered)
    newest: dict[str, tuple[int, str]] = {}
    for name, data in shelf_mod.json_items(box, "asks"):
        head, _, tail = name.rpartition("-")
        if tail.isdigit() and int(tail) >= newest.get(head, (-1, ""))[0]:
            newest[head] = (int(tail), name)
        if name in answered:
            continue
        expired = jsonio.number(data.get("expired_at")) if isinstance(data, dict) else None
        if expired is not None:
            rows[name] = expired  # unanswered, its asker stopped waiting: history too
    waited_on = {r.ask for r in store.rows(box, include_done=False) if r.ask}
    protected = {name for _, name in newest.values()} | waited_on | set(box.names("approved"))
    return list(rows.items()), frozenset(protected)


def _forged(wd: WorkDir) -> tuple[list[tuple[str, float | None]], frozenset[str]]:
    rows = [
        (name, jsonio.number(data.get("at")) if isinstance(data, dict) else None)
        for name, data in shelf_mod.json_items(wd.shelf, "forged")
    ]
    return rows, frozenset()


def due(wd: WorkDir, now: float) -> list[Expired]:
    """Every record retention would delete now, kind by kind, oldest first."""
    from looop_py.loops import store  # rounds' records: `looop prune` and the hourly look only

    cfg: RetentionConfig = wd.config.retention
    kinds = (
        (store.ARCHIVE, _rounds, cfg.rounds_s, cfg.rounds_keep),
        ("asks", _asks, cfg.asks_s, cfg.asks_keep),
        ("forged", _forged, cfg.forged_s, cfg.forged_keep),
    )
    out: list[Expired] = []
    for kind, read, keep_s, keep in kinds:
        if wd.shelf.empty(kind) and (kind != "asks" or wd.shelf.empty("answers")):
            continue
        rows, protected = read(wd)
        at = dict(rows)
        for name, why in pick(rows, now, keep_s=keep_s, keep=keep, protected=protected):
            out.append(Expired(kind, name, at[name], why))
    return out


def delete(wd: WorkDir, expired: list[Expired]) -> list[Expired]:
    """Delete each record; returns those that were there. An ask goes before its answer:
    an answer left alone is history (the next look takes it), an ask left alone would
    look unanswered again."""
    box = wd.shelf
    gone: list[Expired] = []
    for e in expired:
        if e.kind == "asks":
            had = box.delete("asks", e.name)
            had = box.delete("answers", e.name) or had
        else:
            had = box.delete(e.kind, e.name)
        if had:
            gone.append(e)
    return gone


# -- `looop prune` ----------------------------------------------------------------------


# @record: nothing compares these (identity) or assigns to them (mypy); each generated
# method is a full beat's fixed cost at import (records.py).
@record
class Pruned:
    """What one housekeeping pass removed (or, dry, would remove)."""

    sessions_removed: list[str]
    runs_removed: list[str]
    rounds_archived: list[str]
    events: list[dict[str, Any]]  # every housekeeping event, as events.jsonl holds them
    history_removed: list[Expired] = field(default_factory=list)
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
    from looop_py.loops import store  # rounds' records: `looop prune` and the hourly look only
    from looop_py.workdir import runs  # `looop prune` only: a beat loads neither
    from looop_py.workers import reap

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
        history = delete(wd, due(wd, now))
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
    from looop_py.loops import store  # rounds' records: `looop prune` and the hourly look only
    from looop_py.workers import reap, records  # `looop prune --dry-run` only

    now = wd.clock()
    sessions = [d.name for d in records.session_dirs(wd.paths) if reap.settled(d)]
    keep = wd.config.limits.runs_keep
    try:
        run_dirs = sorted(p.name for p in wd.paths.runs.iterdir() if p.is_dir())
    except FileNotFoundError:
        run_dirs = []
    old_runs = run_dirs[:-keep] if keep > 0 else []
    archived = store.to_archive(wd.shelf, now)
    return Pruned(sessions, old_runs, archived, [], due(wd, now), dry_run=True)


def _counts(gone: list[Expired]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in gone:
        counts[e.kind] = counts.get(e.kind, 0) + 1
    return counts
