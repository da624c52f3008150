"""Ending a worker and everything it started: SIGTERM, then SIGKILL after the grace.

The worker leads its own process group; descendants that left the group are
listed (pid + create time) before anything is signalled, so a recycled pid is
never hit. The supervisor records how the worker ended; if it is gone too,
`kill` records it (state killed, lost).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looop_py import jsonio
from looop_py.errors import UsageError
from looop_py.identity import descendants, group_members, is_alive
from looop_py.workdir.paths import Paths
from looop_py.workers.records import (
    KILL,
    LIVE_STATES,
    META,
    STATUS,
    as_dict,
    read_record,
    session_dir,
)

SUPERVISOR_RECORD_S = 3.0  # how long `kill` waits for the supervisor to record the end


@dataclass(frozen=True)
class KillResult:
    id: str
    was_alive: bool
    state: str
    exit_code: int | None
    forced: bool = False  # it needed SIGKILL

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "was_alive": self.was_alive,
            "state": self.state,
            "exit_code": self.exit_code,
            "forced": self.forced,
        }


def kill(paths: Paths, id: str, *, reason: str | None = None) -> KillResult:
    """End a worker and everything it started: SIGTERM, then SIGKILL after the grace."""
    d = session_dir(paths, id)
    if not d.is_dir():
        raise UsageError(f"no worker {id!r}", "list them with `looop workers --all`")
    meta = read_record(d / META)
    pid, created = meta.get("pid"), meta.get("create_time")
    if not is_alive(pid, created):
        st = read_record(d / STATUS)
        return KillResult(id, False, str(st.get("state", "unknown")), st.get("exit_code"))
    assert isinstance(pid, int) and isinstance(created, int | float)
    jsonio.write_json(d / KILL, {"reason": reason, "at": time.time()})
    limits = as_dict(meta.get("limits"))
    grace = jsonio.number(limits.get("kill_grace_s"))
    grace = 5.0 if grace is None else grace
    tree = [(pid, float(created)), *descendants(pid)]
    _signal_group(pid, signal.SIGTERM)  # the worker is its group's leader
    for child, child_created in tree[1:]:
        _signal(child, child_created, signal.SIGTERM)  # ones that left the group
    forced = not _wait_gone(pid, tree, grace)
    if forced:
        _signal_group(pid, signal.SIGKILL)
        for child, child_created in tree:
            _signal(child, child_created, signal.SIGKILL)
        _wait_gone(pid, tree, 2.0)
    status = _await_record(d, meta)
    return KillResult(id, True, str(status.get("state")), status.get("exit_code"), forced)


def _wait_gone(pgid: int, tree: list[tuple[int, float]], timeout_s: float) -> bool:
    """Wait until the tree and the whole group are gone; False if not within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not any(is_alive(p, c) for p, c in tree) and not group_members(pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _await_record(d: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """The supervisor records the end; if it is gone, record it here."""
    deadline = time.monotonic() + SUPERVISOR_RECORD_S
    while True:
        status = read_record(d / STATUS)
        if status.get("state") not in LIVE_STATES:
            return status
        sup_alive = is_alive(meta.get("supervisor_pid"), meta.get("supervisor_create_time"))
        if not sup_alive or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    status = {"state": "killed", "exit_code": None, "ended_at": time.time(), "lost": True}
    jsonio.write_json(d / STATUS, status)
    return status


def _signal(pid: int, created: float, sig: int) -> None:
    if is_alive(pid, created):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
