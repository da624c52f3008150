"""Goals, sensors and rounds for the page: each listed, each on its own page (no web stack).

A goal: its frontmatter, body, its loop's rounds and their spend. A sensor: its
last reading, health, the history of its signal from the event log (each beat
records what changed), and the numbers in it for a chart. A round: its record.
"""

from __future__ import annotations

import json
import os
from typing import Any

from looop_py import jsonio
from looop_py.errors import LooopError
from looop_py.ids import is_safe_segment
from looop_py.loops import store
from looop_py.web import data
from looop_py.workdir import goals as goal_files
from looop_py.workdir import shelf
from looop_py.workdir.context import WorkDir
from looop_py.workdir.frontmatter import frontmatter
from looop_py.workdir.goalfile import read_goal

GOALS_PAGE = 100
READINGS_SHOWN = 50
ROUNDS_DETAILED = 20  # a goal's newest rounds shown with their maker's and checker's results


def _meta(body: bytes) -> tuple[dict[str, Any], str, str | None]:
    text = body.decode("utf-8", "replace")
    try:
        meta, rest = frontmatter(text)
    except Exception as exc:
        return {}, text, f"frontmatter: {exc}"
    return meta, rest, None


def _title(meta: dict[str, Any], body: str, goal_id: str) -> str:
    for key in ("title", "name"):
        if isinstance(meta.get(key), str):
            return str(meta[key])
    for line in body.splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip()[:120]
    return goal_id


def goals(wd: WorkDir, query: str = "", page: int = 1) -> dict[str, Any]:
    """Every goal (those whose id or title holds `query`), GOALS_PAGE a page, sorted by id."""
    q = query.lower()
    rows = []
    for g in goal_files.read_goals(wd):
        meta, body, bad = _meta(g.body) if g.error is None else ({}, "", g.error)
        title = _title(meta, body, g.id)
        if q and q not in g.id.lower() and q not in title.lower():
            continue
        rows.append(
            {
                "id": g.id,
                "title": title,
                "keys": sorted(str(k) for k in meta),
                "loop": bool(meta.get("loop") or meta.get("maker") or meta.get("pattern")),
                "error": bad,
            }
        )
    page = max(1, page)
    return {
        "goals": rows[(page - 1) * GOALS_PAGE : page * GOALS_PAGE],
        "total": len(rows),
        "page": page,
        "pages": max(1, -(-len(rows) // GOALS_PAGE)),
        "query": query,
    }


def goal(wd: WorkDir, goal_id: str) -> dict[str, Any] | None:
    """One goal: frontmatter, body, its loop's rounds (newest first) and their tokens."""
    if not is_safe_segment(goal_id):
        return None
    g = read_goal(goal_id, wd.paths.goals / f"{goal_id}.md")
    if g is None:
        return None
    meta, body, bad = _meta(g.body) if g.error is None else ({}, "", g.error)
    rounds = [r.to_json() for r in store.rows(wd.shelf, include_done=True) if r.loop == goal_id]
    rounds.reverse()
    for r in rounds[:ROUNDS_DETAILED]:
        r.update(_verdicts(wd, r["id"]))
    return {
        "id": goal_id,
        "frontmatter": meta,
        "body": body,
        "error": bad,
        "rounds": rounds,
        "tokens": sum(int(r.get("tokens") or 0) for r in rounds),
        "report": store.reports(wd.shelf).get(goal_id),
    }


def _verdicts(wd: WorkDir, round_id: str) -> dict[str, Any]:
    """A round's maker and checker results, each as its status and the start of its text."""
    got = round_record(wd, round_id) or {}
    record: dict[str, Any] = got["record"] if isinstance(got.get("record"), dict) else {}
    out: dict[str, Any] = {}
    for role in ("maker", "checker"):
        result = record.get(role)
        if isinstance(result, dict):
            text = " ".join(str(result.get("text") or "").split())
            out[role] = f"{result.get('status')}" + (f": {text[:160]}" if text else "")
    return out


def round_record(wd: WorkDir, round_id: str) -> dict[str, Any] | None:
    """A round's whole record (live or archived): maker, checker, proposal, gate, outcome."""
    if not is_safe_segment(round_id):
        return None
    for kind in (store.LIVE, store.ARCHIVE):
        try:
            got = shelf.read_json(wd.shelf, kind, round_id)
        except LooopError:
            return {"id": round_id, "unreadable": True}
        if isinstance(got, dict):
            return {"id": round_id, "record": got}
    return None


def _snapshot(wd: WorkDir, name: str) -> dict[str, Any] | None:
    try:
        got = jsonio.read_json(wd.paths.snapshots / f"sensor-{name}.json", None)
    except LooopError:
        return {"signal": {"error": "unreadable snapshot"}, "detail": {}}
    return got if isinstance(got, dict) else None


def _health(snap: dict[str, Any] | None) -> str:
    if snap is None:
        return "not run yet"
    signal = snap.get("signal")
    return "failing" if isinstance(signal, dict) and signal.get("error") else "ok"


def _sensor_names(wd: WorkDir) -> list[str]:
    names = set()
    for folder, prefix, suffix in (
        (wd.paths.sensors, "", ".sh"),
        (wd.paths.snapshots, "sensor-", ".json"),
    ):
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        names |= {
            n.removeprefix(prefix).removesuffix(suffix)
            for n in entries
            if n.startswith(prefix) and n.endswith(suffix) and not n.startswith(".")
        }
    return sorted(n for n in names if is_safe_segment(n))


def sensors(wd: WorkDir) -> dict[str, Any]:
    rows = []
    for name in _sensor_names(wd):
        snap = _snapshot(wd, name)
        rows.append(
            {
                "name": name,
                "health": _health(snap),
                "signal": None if snap is None else snap.get("signal"),
                "script": (wd.paths.sensors / f"{name}.sh").exists(),
            }
        )
    return {"sensors": rows}


def number_of(signal: Any) -> tuple[str, float] | None:
    """The number a signal carries: itself, or its first numeric field (by key); a failed
    sensor's signal (its exit code) is no reading."""
    if isinstance(signal, bool) or (isinstance(signal, dict) and "error" in signal):
        return None
    if isinstance(signal, int | float):
        return ("signal", float(signal))
    if isinstance(signal, dict):
        for key in sorted(signal):
            value = signal[key]
            if isinstance(value, int | float) and not isinstance(value, bool):
                return (str(key), float(value))
    return None


def sensor(wd: WorkDir, name: str) -> dict[str, Any] | None:
    """A sensor's last reading, health, the script's head, and its signal's history."""
    if not is_safe_segment(name) or name not in _sensor_names(wd):
        return None
    snap = _snapshot(wd, name)
    item = f"snap:sensor-{name}"
    readings = []
    for e in data.beat_events(wd.paths, 0):
        for c in e.get("changed") or []:
            if isinstance(c, dict) and c.get("item") == item:
                try:
                    signal = json.loads(c["new"]) if isinstance(c.get("new"), str) else None
                except ValueError:
                    signal = c.get("new")
                sensed = (
                    (e.get("sensors") or {}).get(name)
                    if isinstance(e.get("sensors"), dict)
                    else None
                )
                readings.append({"ts": e.get("ts"), "t": e["t"], "signal": signal, "run": sensed})
    numbers = [(r["t"], n) for r in readings if (n := number_of(r["signal"])) is not None]
    key = numbers[-1][1][0] if numbers else None
    script = data.read_capped(wd.paths.sensors / f"{name}.sh", 4096)
    return {
        "name": name,
        "health": _health(snap),
        "snapshot": snap,
        "readings": readings[::-1][:READINGS_SHOWN],
        "changes": len(readings),
        "series_key": key,
        "series": [(t, n[1]) for t, n in numbers if n[0] == key],
        "script": script,
    }
