"""System probes: looop's own state, read in process as `{signal, detail}` snapshots.

A probe's signal holds only what should wake the loop (which workers exist and
how they ended, who holds which claim); counters and ages go to detail.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from looop_py.errors import CorruptFile
from looop_py.workdir import shelf
from looop_py.workdir.goalfile import GoalFile
from looop_py.workdir.paths import has_entries
from looop_py.workdir.shelf import GOAL_ACTIVITY

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir

    Snapshot = dict[str, Any]

    from looop_py.asks.mailbox import AskView
    from looop_py.workers.records import SessionView


class Seen:
    """One beat's probing: what the probes are given, and what they found, typed.

    Given: the work dir, the beat's time, the goal ids SENSE read. Found: the
    sessions, pending asks and per-goal activity the probes read anyway, so
    the prompt and the rules decider use them instead of reading the files
    again or scraping the snapshots by key.
    """

    __slots__ = (
        "asks",
        "goal_ids",
        "last_acted",
        "now",
        "persist",
        "sessions",
        "wd",
    )

    def __init__(
        self,
        wd: WorkDir,
        now: float,
        goal_ids: tuple[str, ...],
        persist: bool = True,
    ) -> None:
        self.wd = wd
        self.now = now
        self.goal_ids = goal_ids
        self.persist = persist  # False: save nothing under state/ (`looop sense`)
        self.sessions: list[SessionView] = []
        self.asks: list[AskView] = []  # unanswered, each with its state
        self.last_acted: dict[str, float | None] = {}  # goal id → when a move last touched it

    @property
    def live_workers(self) -> frozenset[str]:
        if not self.sessions:
            return frozenset()  # no worker: the records module stays unloaded
        from looop_py.workers.records import LIVE_STATES  # asked when deciding, never when quiet

        return frozenset(v.id for v in self.sessions if v.state in LIVE_STATES)


Probe = Callable[[Seen], "Snapshot"]


def sessions(seen: Seen) -> Snapshot:
    """Worker sessions: id, state, exit code, health and verify verdict of each.

    Times and outputs go to detail, so only a real change wakes the loop: a
    worker ending, getting stuck, asking, or failing its verify. Detail holds
    times, not ages: an age would change, and rewrite the snapshot, every beat.
    """
    paths, now = seen.wd.paths, seen.now
    try:
        with os.scandir(paths.sessions) as it:
            if not any(e.is_dir() for e in it):
                return {"signal": [], "detail": {"count": 0}}
    except FileNotFoundError:
        return {"signal": [], "detail": {"count": 0}}
    from looop_py.workers import records  # only when sessions/ has entries

    views = seen.sessions = records.list_sessions(seen.wd, now)
    workers: dict[str, Any] = {}
    for v in views:
        row: dict[str, Any] = {
            "started_at": v.started_at,
            "ended_at": v.ended_at,
            "output_at": v.output_at,
            "pid": v.pid,
            "runtime": v.runtime,
        }
        if v.verify_output:
            row["verify_output"] = v.verify_output[-1024:]
        if v.result:
            row["result"] = {"status": v.result.get("status"), "summary": v.result.get("summary")}
        if v.usage:
            row["usage"] = v.usage
        if v.lost:
            row["lost"] = True
        workers[v.id] = row
    return {
        # A loop round's own maker and checker are the engine's business, not the decider's.
        "signal": [v.signal_row() for v in views if v.round is None],
        "detail": {"count": len(views), "live": sum(v.alive for v in views), "workers": workers},
    }


def claims(seen: Seen) -> Snapshot:
    """The live leases: which session holds which name (epochs and expiries in detail).

    On a shared backend (etcd) they are the claims every host holds there, less the
    `pulse` claim beats take in turn.
    """
    paths, now = seen.wd.paths, seen.now
    shared = seen.wd.shelf.shared
    if not shared and not has_entries(paths.claims, ".json"):
        return {"signal": [], "detail": {"count": 0}}
    from looop_py.coord.holders import ROUND_PREFIX  # only when there are claims to list

    if shared:
        from looop_py.coord import base, choose  # a shared backend: loaded by the beat already

        views = [v for v in choose.coordinator(seen.wd).list_claims(now) if v.name != base.PULSE]
    else:
        from looop_py.coord import reaper  # only when claims/ has entries

        views = reaper.list_claims(paths, now)
    live = [v for v in views if v.live]
    # A round's claim on its target comes and goes with the round: the engine's business.
    rows = [
        {"name": v.name, "session": v.claim.session if v.claim else None}
        for v in live
        if not (v.claim and (v.claim.session or "").startswith(ROUND_PREFIX))
    ]
    detail = {
        v.name: {k: v.claim.to_json()[k] for k in ("pid", "epoch", "acquired_at", "expires_at")}
        for v in live
        if v.claim
    }
    return {"signal": rows, "detail": {"count": len(rows), "claims": detail}}


def goals(seen: Seen) -> Snapshot:
    """When each goal was last acted on: detail only, so fairness never wakes the loop."""
    box = seen.wd.shelf  # state/goal-activity.json; shared on etcd, like the world
    try:
        ledger = shelf.read_json(box, "state", GOAL_ACTIVITY, None)
    except CorruptFile:
        ledger = False
    acted = ledger.get("goals") if isinstance(ledger, dict) else None
    if not isinstance(acted, dict):
        acted = {}
        if ledger is not None and seen.persist:  # a ledger that does not fit is rebuilt
            with contextlib.suppress(OSError):
                box.delete("state", GOAL_ACTIVITY)
    # One row for every goal never acted on (10,000 share it), built in one C call; then
    # the goals the ledger knows. No age here: it would change every beat and rewrite the
    # snapshot; the prompt computes it when it shows the probe (decide.gather_prompt).
    detail: dict[str, Any] = dict.fromkeys(seen.goal_ids, {"last_acted": None})  # noqa: RUF024
    seen.last_acted.update(dict.fromkeys(seen.goal_ids))
    for goal_id, last in acted.items():
        if goal_id in detail and isinstance(last, int | float):
            seen.last_acted[goal_id] = float(last)
            detail[goal_id] = {"last_acted": float(last)}
    return {"signal": {}, "detail": {"goals": detail}}


def asks(seen: Seen) -> Snapshot:
    """Pending asks: a new one wakes the loop once; when each was filed stays in detail."""
    if seen.wd.shelf.empty("asks"):
        return {"signal": {"pending": []}, "detail": {}}
    from looop_py.asks import mailbox  # only when there are asks

    views = seen.asks = mailbox.listing(seen.wd, record=seen.persist)
    signal: dict[str, list[str]] = {"pending": []}
    for v in views:  # an ask turning stranded or expired wakes the loop once
        signal.setdefault(v.state.value, []).append(v.ask.id)
    return {
        "signal": signal,
        "detail": {
            v.ask.id: {
                "asker": v.ask.asker,
                "kind": v.ask.kind,
                "created_at": v.ask.created_at,
                "state": v.state.value,
            }
            for v in views
        },
    }


def schedules(seen: Seen) -> Snapshot:
    """Timers set by write_schedule and loop cadences (as `loop:<name>`).

    The signal moves only when a timer or a loop comes due, never with the
    seconds in between.
    """
    now = seen.now
    snap: Snapshot = {"signal": {}, "detail": {}}
    if not seen.wd.shelf.empty("timers"):
        from looop_py.schedules import timers  # only when a timer is set

        snap = timers.probe(seen.wd, now)
    from looop_py.loops import index as loopindex  # cheap; the engine only with loops

    due = loopindex.cadences(loopindex.index(seen.wd, save=seen.persist))
    if due:
        from looop_py.schedules.book import book_of, schedules_snapshot  # a loop has a cadence

        book = schedules_snapshot(book_of(seen.wd), due, now, save=seen.persist)
        # The engine starts a due loop's round itself: a cadence is detail, never a wake;
        # only a cadence that does not parse (a human must fix it) stays in the signal.
        for name in sorted({*book["signal"], *book["detail"]}):
            sig = book["signal"].get(name)
            entry = dict(sig) if isinstance(sig, dict) else {}
            entry.update(book["detail"].get(name) or {})
            entry.pop("due_in_s", None)  # an age: it would rewrite the snapshot every beat
            snap["detail"][f"loop:{name}"] = entry
            if sig == "invalid":
                snap["signal"][f"loop:{name}"] = "invalid"
    return snap


def rounds(seen: Seen) -> Snapshot:
    """Rounds that need someone: awaiting approval, unreadable, or a loop's new report."""
    box = seen.wd.shelf
    if box.empty("rounds") and box.get("state", "round-reports") is None:
        return {"signal": {"awaiting-approval": [], "reports": {}}, "detail": {}}  # as store.probe
    from looop_py.loops import store  # only when there are rounds

    return store.probe(box)


PROBES: tuple[tuple[str, Probe], ...] = (
    ("sys-sessions", sessions),
    ("sys-claims", claims),
    ("sys-goals", goals),
    ("sys-asks", asks),
    ("sys-schedules", schedules),
    ("sys-rounds", rounds),
)


def run_probes(
    wd: WorkDir,
    now: float,
    *,
    goals: Sequence[GoalFile],
    persist: bool = True,
) -> tuple[list[tuple[str, Snapshot]], Seen]:
    """Every probe's snapshot; a probe that breaks reports the error as its signal.

    `goals` are the goal files this beat read (the probes list no directory
    twice); `persist=False` keeps the probes from saving anything under state/.
    """
    seen = Seen(wd, now, tuple([g.id for g in goals]), persist)
    out: list[tuple[str, Snapshot]] = []
    for stem, probe in PROBES:
        try:
            snap = probe(seen)
        except Exception as exc:  # a probe bug must not stop the beat
            from looop_py.workdir import journal  # only when a probe broke

            journal.log_bug(wd.paths, f"probe {stem}", now)
            snap = {"signal": {"error": "probe-failed"}, "detail": {"message": str(exc)}}
        out.append((stem, snap))
    return out, seen
