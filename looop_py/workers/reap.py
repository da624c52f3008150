"""Worker housekeeping, at the start of every beat: settle the dead, prune the old.

A worker whose process is gone is recorded as lost if its supervisor died
too; a dead session is verified (its `verify` command, within the beat's
verify budget) and finalized once: usage read from its output, its worktree
removed or kept. Finalized sessions are pruned after `session_ttl_s`.
Claims are not reaped here: the beat runs the claim reaper itself.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py import jsonio, procs
from looop_py.identity import is_alive
from looop_py.ids import is_safe_segment
from looop_py.spend import ledger, prices
from looop_py.workdir.environ import child_env
from looop_py.workdir.paths import Paths
from looop_py.workers import runtimes, workspaces
from looop_py.workers.records import (
    LIVE_STATES,
    META,
    OUTPUT,
    RESULT,
    STARTING_GRACE_S,
    STATUS,
    VERIFY,
    as_dict,
    read_record,
    session_dirs,
)

if TYPE_CHECKING:
    from looop_py.workdir.config import Config
    from looop_py.workdir.context import WorkDir


def housekeeping(wd: WorkDir, now: float, *, ttl_s: float | None = None) -> list[dict[str, Any]]:
    """Record lost workers, verify and settle dead ones, prune old records.

    A settled session is pruned once it has been dead for `ttl_s` (default
    [workers] session_ttl_s; `looop prune` passes 0). Returns one event dict
    per thing done ({"event": name, ...}); the pulse logs them.
    """
    config = wd.config
    events: list[dict[str, Any]] = []
    dirs = session_dirs(wd.paths)
    if dirs:
        ttl = config.workers.session_ttl_s if ttl_s is None else ttl_s
        budget_end = time.monotonic() + config.workers.verify_budget_s
        for d in dirs:
            events += _housekeep_one(wd, d, now, budget_end, ttl_s=ttl)
    return events


def settled(d: Path) -> bool:
    """Would `looop prune` remove this session now: read, finalized, its worker gone?"""
    meta, status = read_record(d / META), read_record(d / STATUS)
    if meta.get("unreadable") or status.get("unreadable") or not status.get("finalized_at"):
        return False
    return not (isinstance(meta.get("pid"), int) and is_alive(meta["pid"], meta.get("create_time")))


def _housekeep_one(
    wd: WorkDir, d: Path, now: float, budget_end: float, *, ttl_s: float
) -> list[dict[str, Any]]:
    config = wd.config
    meta, status = read_record(d / META), read_record(d / STATUS)
    if meta.get("unreadable") or status.get("unreadable"):
        return []  # never remove what cannot be read
    sid = d.name
    if isinstance(meta.get("pid"), int):
        if is_alive(meta["pid"], meta.get("create_time")):
            return []
    elif status.get("state") == "starting":
        started = jsonio.number(meta.get("started_at"))
        if started is not None and now - started < STARTING_GRACE_S:
            return []
    events: list[dict[str, Any]] = []
    if status.get("state") in LIVE_STATES:
        if is_alive(meta.get("supervisor_pid"), meta.get("supervisor_create_time")):
            return []  # it is writing the exit code right now
        status = {**status, "state": "exited", "exit_code": None, "ended_at": now, "lost": True}
        jsonio.write_json(d / STATUS, status)
        events.append({"event": "worker_lost", "id": sid})
    if not status.get("finalized_at"):
        verify = meta.get("verify")
        if isinstance(verify, str) and verify.strip() and not (d / VERIFY).exists():
            if time.monotonic() >= budget_end:
                return events  # out of verify time this beat; the next beat settles it
            events.append(_run_verify(wd.paths, config, d, verify, now))
        events.append(_finalize(wd, d, meta, status, now))
        return events
    ended = (
        jsonio.number(status.get("ended_at")) or jsonio.number(status.get("finalized_at")) or now
    )
    if now - ended > ttl_s:
        shutil.rmtree(d, ignore_errors=True)
        events.append({"event": "session_pruned", "id": sid})
    return events


def _run_verify(paths: Paths, config: Config, d: Path, cmd: str, now: float) -> dict[str, Any]:

    env = child_env(paths, {"LOOOP_VERIFY_SESSION": d.name}, config=config)
    res = procs.run(
        ["bash", "-c", cmd],
        cwd=paths.root,
        env=env,
        timeout_s=config.workers.verify_timeout_s,
        cap=65536,
    )
    out = (res.stdout[-2048:] + res.stderr_tail).decode("utf-8", "replace").strip()
    verdict = "pass" if res.exit_code == 0 else "fail"
    jsonio.write_json(
        d / VERIFY,
        {
            "verdict": verdict,
            "ok": verdict == "pass",
            "exit_code": res.exit_code,
            "timed_out": res.timed_out,
            "output": out,
            "duration_s": round(res.duration_s, 3),
            "at": now,
        },
    )
    return {
        "event": "worker_verified",
        "id": d.name,
        "verdict": verdict,
        "exit_code": res.exit_code,
    }


def _finalize(
    wd: WorkDir, d: Path, meta: dict[str, Any], status: dict[str, Any], now: float
) -> dict[str, Any]:
    """Once per dead session: usage from its output, its worktree settled."""

    usage = runtimes.usage_from_output(str(meta.get("usage_stream") or ""), d / OUTPUT)
    result = read_record(d / RESULT)
    # Charged before finalized_at is written: a beat killed in between finalizes it again,
    # and the ledger's key makes that second charge a no-op.
    charge(wd, d, now, usage or as_dict(result.get("usage")) or None, meta)
    status = {**status, "finalized_at": now}
    if usage is not None:
        status["usage"] = usage
    ws = meta.get("workspace")
    if isinstance(ws, dict):
        try:
            status["workspace"] = workspaces.dispose(workspaces.Worktree.from_json(ws))
        except Exception as exc:  # git broke: keep the worktree, say why
            status["workspace"] = {**ws, "kept": True, "reason": f"dispose failed: {exc}"}
    jsonio.write_json(d / STATUS, status)
    event: dict[str, Any] = {
        "event": "worker_ended",
        "id": d.name,
        "state": status.get("state"),
        "exit_code": status.get("exit_code"),
        "result": result.get("status"),
    }
    if usage is not None:
        event["usage"] = usage
    if isinstance(status.get("workspace"), dict):
        event["worktree"] = "kept" if status["workspace"].get("kept") else "removed"
    return event


def source_of(meta: dict[str, Any]) -> str:
    """Whose spend a worker is: its loop's (a round's maker or checker), else `workers`."""
    loop = meta.get("loop")
    return ledger.loop_source(loop) if isinstance(loop, str) and loop else ledger.WORKERS


def charge(
    wd: WorkDir,
    d: Path,
    now: float,
    usage: dict[str, Any] | None,
    meta: dict[str, Any] | None = None,
) -> None:
    """Charge an ended worker's reported usage to the daily ledger, once (keyed by its id)."""
    meta = read_record(d / META) if meta is None else meta
    runtime = str(meta.get("runtime") or "")
    price = prices.for_runtime(wd.config, runtime, str(meta.get("usage_stream") or ""))
    c = ledger.from_usage(f"worker:{d.name}", source_of(meta), usage, runtime=runtime, price=price)
    if c is not None:
        ledger.record_charge(wd, now, c)


def kept_worktrees(paths: Paths, config: Config) -> list[dict[str, Any]]:
    """Worktrees left on disk because they hold work, with the session that made each."""

    out: list[dict[str, Any]] = []
    root = workspaces.root(paths, config.workers)
    for wid in workspaces.kept(paths, config.workers):
        status = read_record(paths.sessions / wid / STATUS) if is_safe_segment(wid) else {}
        ws = as_dict(status.get("workspace"))
        out.append(
            {
                "id": wid,
                "path": str(root / wid),
                "branch": workspaces.branch_for(wid),
                "reason": ws.get("reason"),
                "session": (paths.sessions / wid).is_dir(),
            }
        )
    return out
