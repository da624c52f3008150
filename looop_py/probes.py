"""System probes: looop's own state, read in process as `{signal, detail}` snapshots.

A probe's signal holds only what should wake the loop (which workers exist and
how they ended, who holds which claim); counters and ages go to detail.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import CorruptFile
from looop_py.goals import goal_paths
from looop_py.paths import Paths, is_safe_segment

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Snapshot = dict[str, Any]
    Probe = Callable[[Paths, float], Snapshot]


def _json_files(directory: Path) -> list[tuple[str, Any]]:
    """(stem, parsed body) of each *.json in a directory; unreadable bodies map to None."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    found: list[tuple[str, Any]] = []
    for entry in entries:
        stem = entry.name.removesuffix(".json")
        if stem == entry.name or not is_safe_segment(stem):
            continue
        try:
            found.append((stem, jsonio.read_json(Path(entry.path))))
        except (CorruptFile, OSError):
            found.append((stem, None))
    return found


def sessions(paths: Paths, now: float) -> Snapshot:
    """Worker sessions: id, state and exit code of each (filled by the workers issue)."""
    rows: list[dict[str, Any]] = []
    try:
        entries = sorted(os.scandir(paths.sessions), key=lambda e: e.name)
    except FileNotFoundError:
        entries = []
    for entry in entries:
        if not entry.is_dir() or not is_safe_segment(entry.name):
            continue
        try:
            status = jsonio.read_json(Path(entry.path) / "status.json", {})
        except CorruptFile:
            status = {"state": "unreadable"}
        rows.append(
            {
                "id": entry.name,
                "state": status.get("state", "unknown"),
                "exit_code": status.get("exit_code"),
            }
        )
    return {"signal": rows, "detail": {"count": len(rows)}}


def claims(paths: Paths, now: float) -> Snapshot:
    """Live leases: which session holds which name."""
    rows = [
        {"name": name, "session": body.get("session") if isinstance(body, dict) else None}
        for name, body in _json_files(paths.claims)
    ]
    return {"signal": rows, "detail": {"count": len(rows)}}


def goals(paths: Paths, now: float) -> Snapshot:
    """Per-goal age since last acted on: detail only, so fairness never wakes the loop."""
    try:
        ledger = jsonio.read_json(paths.goal_activity, {})
    except CorruptFile:
        ledger = {}
    acted = ledger.get("goals", {}) if isinstance(ledger, dict) else {}
    detail: dict[str, Any] = {}
    for goal_id, _ in goal_paths(paths):
        last = acted.get(goal_id)
        last = float(last) if isinstance(last, int | float) else None
        detail[goal_id] = {
            "last_acted": last,
            "age_s": None if last is None else max(0, round(now - last)),
        }
    return {"signal": {}, "detail": {"goals": detail}}


def _empty_dir(path: Path) -> bool:
    try:
        with os.scandir(path) as it:
            return next(it, None) is None
    except FileNotFoundError:
        return True


def asks(paths: Paths, now: float) -> Snapshot:
    """Pending asks: a new one wakes the loop once; ages stay in detail."""
    if _empty_dir(paths.asks):
        return {"signal": {"pending": []}, "detail": {}}
    from looop_py import mailbox

    pending = mailbox.pending(paths)
    return {
        "signal": {"pending": [a.id for a in pending]},
        "detail": {
            a.id: {"asker": a.asker, "kind": a.kind, "age_s": round(now - a.created_at)}
            for a in pending
        },
    }


def schedules(paths: Paths, now: float) -> Snapshot:
    """Timers set by write_schedule; the signal moves only when one comes due."""
    if _empty_dir(paths.timers):
        return {"signal": {}, "detail": {}}
    from looop_py import schedules as timers

    return timers.probe(paths, now)


PROBES: tuple[tuple[str, Probe], ...] = (
    ("sys-sessions", sessions),
    ("sys-claims", claims),
    ("sys-goals", goals),
    ("sys-asks", asks),
    ("sys-schedules", schedules),
)


def run_probes(paths: Paths, now: float) -> list[tuple[str, Snapshot]]:
    """Every probe's snapshot; a probe that breaks reports the error as its signal."""
    out: list[tuple[str, Snapshot]] = []
    for stem, probe in PROBES:
        try:
            snap = probe(paths, now)
        except Exception as exc:  # a probe bug must not stop the beat
            snap = {"signal": {"error": "probe-failed"}, "detail": {"message": str(exc)}}
        out.append((stem, snap))
    return out
