"""Durable timers the decider sets with write_schedule: the shelf's `timers` records
(state/schedules/<name>.json on one machine, keys every host shares on etcd).

A timer enters the world only through the `sys-schedules` probe, whose signal
changes when a timer comes due (a one-shot goes pending → due; a recurring one
bumps a period counter), never with the passing seconds in between.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from looop_py.errors import UsageError
from looop_py.ids import check_segment
from looop_py.workdir import shelf

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir


def write(
    wd: WorkDir,
    name: str,
    *,
    now: float,
    in_s: int | None = None,
    every_s: int | None = None,
    cron: str | None = None,
) -> dict[str, Any]:
    check_segment(name, "schedule name")
    if cron is not None:
        from looop_py.engine.cadence import Schedule  # only when a timer is set

        Schedule.parse(f"cron {cron}")  # raises a clear error for a bad expression
        record: dict[str, Any] = {"kind": "cron", "cron": cron, "anchor": now}
    elif every_s is not None:
        if every_s < 60:
            raise UsageError("a recurring schedule needs every_s >= 60")
        record = {"kind": "every", "every_s": every_s, "anchor": now}
    elif in_s is not None and in_s > 0:
        record = {"kind": "once", "at": now + in_s}
    else:
        raise UsageError("a schedule needs one of in_s > 0, every_s >= 60 or cron")
    shelf.write_json(wd.shelf, "timers", name, {"v": 1, "name": name, **record})
    return record


def drop(wd: WorkDir, name: str) -> bool:
    return wd.shelf.delete("timers", check_segment(name, "schedule name"))


def load_all(wd: WorkDir) -> dict[str, dict[str, Any]]:
    return {
        name: data if isinstance(data, dict) else {}
        for name, data in shelf.json_items(wd.shelf, "timers")
    }


def state_of(record: dict[str, Any], now: float) -> tuple[Any, dict[str, Any]]:
    """(signal, detail) of one timer at `now`. Pure."""
    kind = record.get("kind")
    if kind == "once":
        at = float(record.get("at", 0))
        return ("due" if now >= at else "pending"), {"kind": kind, "due_in_s": round(at - now)}
    if kind == "every":
        every, anchor = float(record["every_s"]), float(record["anchor"])
        period = int((now - anchor) // every)
        next_in = anchor + (period + 1) * every - now
        return {"period": period}, {"kind": kind, "every_s": every, "next_due_in_s": round(next_in)}
    if kind == "cron":
        from looop_py.engine.cadence import Schedule  # only when a timer is set

        # The next slot moves exactly when a slot passes: a stable signal between slots.
        nxt = Schedule.parse(f"cron {record['cron']}").next_fire(now)
        return {"next_at": round(nxt)}, {
            "kind": kind,
            "cron": record["cron"],
            "next_due_in_s": round(nxt - now),
        }
    return "invalid", {"record": record}


def probe(wd: WorkDir, now: float) -> dict[str, Any]:
    signal: dict[str, Any] = {}
    detail: dict[str, Any] = {}
    for name, record in load_all(wd).items():
        try:
            signal[name], detail[name] = state_of(record, now)
        except (KeyError, TypeError, ValueError, UsageError, ImportError) as exc:
            signal[name], detail[name] = "invalid", {"error": str(exc)}
    return {"signal": signal, "detail": detail}
