"""What `looop status` and `looop why` report, as plain data (the CLI renders it)."""

from __future__ import annotations

import os
import time
from typing import Any

from looop_py import jsonio, world
from looop_py.beat import limits
from looop_py.beat.decide import policy_hash
from looop_py.beat.sense import load_committed
from looop_py.errors import CorruptFile
from looop_py.locks import PulseLock
from looop_py.workdir import config, journal, mailbox
from looop_py.workdir.goals import goal_paths, read_goals, read_playbook
from looop_py.workdir.paths import Paths
from looop_py.world import is_error_signal


def _count_entries(directory: os.PathLike[str], *, dirs: bool = False, suffix: str = "") -> int:
    try:
        with os.scandir(directory) as it:
            return sum(
                1
                for e in it
                if not e.name.startswith(".")
                and (e.is_dir() if dirs else e.name.endswith(suffix) and e.is_file())
            )
    except FileNotFoundError:
        return 0


def sensor_health(paths: Paths) -> dict[str, list[str]]:
    """Which sensors read ok and which failed, from their latest snapshots."""
    ok: list[str] = []
    failed: list[str] = []
    try:
        entries = sorted(os.scandir(paths.snapshots), key=lambda e: e.name)
    except FileNotFoundError:
        entries = []
    for entry in entries:
        if not (entry.name.startswith("sensor-") and entry.name.endswith(".json")):
            continue
        name = entry.name.removeprefix("sensor-").removesuffix(".json")
        try:
            snap = jsonio.read_json(paths.snapshot(entry.name.removesuffix(".json")), {})
        except (CorruptFile, OSError):
            snap = {"signal": {"error": "unreadable"}}
        signal = snap.get("signal") if isinstance(snap, dict) else None
        (failed if is_error_signal(signal) else ok).append(name)
    return {"ok": ok, "failed": failed}


def limits_now(paths: Paths, now: float) -> dict[str, Any]:
    """Every spend limit and guard, as it stands now."""
    cfg = config.load(paths.config, paths.config_cache)
    lim = cfg.limits
    led = limits.load(paths)
    playbook = read_playbook(paths)
    policy = policy_hash(
        world.build_items(playbook, ((g.id, g.body) for g in read_goals(paths)), ())
    )
    blocked = limits.decide_block(led, now=now, policy=policy, limits=lim)
    spend = limits.spend_today(led.spend, now)
    b = led.backoff
    retry = b.at + limits.backoff_delay(b.fails, lim.backoff_base_s, lim.backoff_max_s) - now
    committed = load_committed(paths)
    return {
        "blocked": blocked,
        "decides_last_hour": sum(1 for t in led.decides if now - t < limits.HOUR),
        "decides_per_hour": lim.decides_per_hour,
        "tokens_today": spend.tokens,
        "daily_tokens": lim.daily_tokens,
        "usd_today": spend.usd,
        "daily_usd": lim.daily_usd,
        "unmetered_in_a_row": spend.unmetered,
        "backoff": {"fails": b.fails, "retry_in_s": max(0, round(retry)), "reason": b.reason}
        if b.fails
        else None,
        "flapping": limits.flapping(limits.load_flap(paths), lim.flap_streak),
        "next_wake": committed.next_wake,
        "pending_asks": len(mailbox.pending(paths)),
    }


def status(paths: Paths) -> dict[str, Any]:
    committed = load_committed(paths)
    last = journal.last_event(paths, "beat")
    return {
        "work_dir": str(paths.root),
        "pulse_running": PulseLock(paths.pulse_lock).held_elsewhere(),
        "last_beat": _beat_summary(last),
        "world_hash": committed.hash,
        "committed_at": committed.at,
        "sensors": sensor_health(paths),
        "failed_steps": failed_steps(paths),
        "limits": limits_now(paths, time.time()),
        "counts": {
            "goals": len(goal_paths(paths)),
            "sessions": _count_entries(paths.sessions, dirs=True),
            "claims": _count_entries(paths.claims, suffix=".json"),
        },
    }


def failed_steps(paths: Paths) -> dict[str, Any] | None:
    """The steps the last beat survived a bug in (cleared by a clean beat), or None."""
    try:
        record = jsonio.read_json(paths.step_failures, None)
    except CorruptFile:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("steps"), list):
        return None
    at = record.get("at")
    return {
        "steps": [str(s) for s in record["steps"]],
        "at": journal.iso(at) if isinstance(at, int | float) and 0 < at < 1e11 else None,
        "log": str(paths.error_log),
    }


def _beat_summary(event: dict[str, Any] | None) -> dict[str, Any] | None:
    if event is None:
        return None
    keep = ("ts", "outcome", "world_hash", "prev_hash", "forced", "reason", "ms", "move")
    return {k: event.get(k) for k in keep if k in event}


def why(paths: Paths) -> dict[str, Any]:
    """Why the last beat skipped or woke: its outcome and every changed item, old → new."""
    last = journal.last_event(paths, "beat")
    if last is None:
        return {"outcome": None, "explanation": "no beat has run yet; run `looop pulse`"}
    outcome = last.get("outcome")
    changed = last.get("changed")
    changed = changed if isinstance(changed, list) else []
    if outcome == "skipped":
        text = "the world hash is unchanged since the last decision, so no decider was called"
    elif outcome == "locked":
        text = "another pulse held the lock, so this one stepped aside"
    elif outcome == "held":
        text = (
            f"{len(changed)} item(s) changed, but the decider was not called: {last.get('reason')}"
        )
    elif last.get("forced") and not changed:
        text = "forced with --force; nothing had changed"
    else:
        text = f"{len(changed)} item(s) changed since the last decision"
        if outcome == "failed":
            text += f", but the beat failed: {last.get('reason')}"
    return {
        "ts": last.get("ts"),
        "outcome": outcome,
        "world_hash": last.get("world_hash"),
        "prev_hash": last.get("prev_hash"),
        "explanation": text,
        "changed": changed,
        "limits": limits_now(paths, time.time()),
    }
