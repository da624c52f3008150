"""Worker session records: what is on disk under sessions/<id>/, and how it reads.

sessions/<id>/ holds meta.json, status.json, prompt.md, output.log, and
result.json (the worker's own report, written by `looop done`), verify.json,
kill.json when present. A view joins them with the process's liveness
(looop_py.identity: pid + create time) into state and health.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass, field
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import CorruptFile, LooopError, UsageError
from looop_py.identity import is_alive
from looop_py.ids import check_segment, is_safe_segment
from looop_py.workdir import shelf
from looop_py.workdir.paths import Paths

# typing is not imported at run time: a worker's supervisor loads this at every start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.workdir.context import WorkDir

META = "meta.json"
STATUS = "status.json"
PROMPT = "prompt.md"
OUTPUT = "output.log"
RESULT = "result.json"
THROWAWAY = "l1-copy"  # an L1 worker's throwaway copy (in a temp dir) when no read-only mode
VERIFY = "verify.json"
CHECKED = (META, STATUS, RESULT, VERIFY)  # the files `misfit` reads
KILL = "kill.json"
SUPERVISOR_LOG = "supervisor.log"


class WorkerState(enum.StrEnum):
    """What status.json says (or, for a dead worker, what housekeeping will record)."""

    STARTING = "starting"  # launched; its supervisor has not reported the pid yet
    RUNNING = "running"
    EXITED = "exited"
    KILLED = "killed"  # ended by `looop worker kill` (or a round out of wall time)
    UNKNOWN = "unknown"  # status.json holds no state
    UNREADABLE = "unreadable"  # status.json cannot be parsed: never reaped blind

    @classmethod
    def parse(cls, value: Any) -> WorkerState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


class Health(enum.StrEnum):
    BUSY = "busy"
    WAITING_ASK = "waiting-ask"  # asked a human, no answer yet
    STUCK = "stuck"  # no output for stuck_after_s
    DEAD = "dead"


LIVE_STATES = frozenset({WorkerState.STARTING, WorkerState.RUNNING})
RESULT_STATUSES = ("done", "done-with-concerns", "blocked")

STARTING_GRACE_S = 30.0  # a `starting` record without a pid is a start in progress this long


def session_dir(paths: Paths, session_id: str) -> Path:
    return paths.sessions / check_segment(session_id, "worker id")


def read_meta(paths: Paths, session_id: str) -> dict[str, Any]:
    """A worker's meta.json (pid, create time, runtime …); {} when there is none."""
    return read_record(session_dir(paths, session_id) / META)


def read_record(path: Path) -> dict[str, Any]:
    """A JSON record as a dict: {} when missing, {"unreadable": True} when it cannot be read."""
    try:
        data = jsonio.read_json(path, {})
    except (CorruptFile, OSError):
        return {"unreadable": True}
    return data if isinstance(data, dict) else {"unreadable": True}


def misfit(d: Path) -> str | None:
    """Why the session in `d` does not fit its schema (for the beat to set it aside), or None.

    A file that is missing is fine (a start in progress, a worker still running).
    """
    for name in CHECKED:
        try:
            data = jsonio.read_json(d / name)
        except CorruptFile as exc:
            return f"{name}: {exc.message.replace(f'{d / name} ', '', 1)}"
        if data is not None and not isinstance(data, dict):
            return f"{name}: a JSON object was expected"
        if not data:
            continue
        for key, kinds in _FIELDS.get(name, {}).items():
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
                return f"{name}: `{key}` is {type(value).__name__}, not {kinds[0].__name__}"
    return None


_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    META: {
        "pid": (int,),
        "create_time": (float, int),
        "started_at": (float, int),
        "supervisor_pid": (int,),
        "runtime": (str,),
        "round": (str,),
    },
    STATUS: {"state": (str,), "exit_code": (int,), "ended_at": (float, int)},
    RESULT: {"status": (str,)},
    VERIFY: {"verdict": (str,)},
}


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Session:
    """A worker that `start` launched."""

    id: str
    dir: Path
    pid: int
    create_time: float
    runtime: str
    command: str
    cwd: Path
    started_at: float
    round: str | None = None
    verify: str | None = None
    workspace: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dir": str(self.dir),
            "pid": self.pid,
            "create_time": self.create_time,
            "runtime": self.runtime,
            "command": self.command,
            "cwd": str(self.cwd),
            "started_at": self.started_at,
            "round": self.round,
            "verify": self.verify,
            "workspace": self.workspace,
        }


@dataclass(frozen=True)
class SessionView:
    """One session as `looop workers` and the sys-sessions probe see it."""

    id: str
    state: WorkerState
    alive: bool
    health: Health
    exit_code: int | None = None
    pid: int | None = None
    runtime: str | None = None
    round: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    idle_s: float | None = None
    uptime_s: float | None = None
    output_at: float | None = None  # its output's last write (a time that holds still)
    verify: str | None = None  # pass | fail, once run
    verify_output: str | None = None
    result: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    workspace: dict[str, Any] | None = None
    lost: bool = False  # ended without its supervisor recording how
    extra: dict[str, Any] = field(default_factory=dict)

    def signal_row(self) -> dict[str, Any]:
        """Only what should wake the loop: no ages, no counters."""
        row: dict[str, Any] = {
            "id": self.id,
            "state": self.state,
            "exit_code": self.exit_code,
            "health": self.health,
        }
        if self.verify is not None:
            row["verify"] = self.verify
        return row

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "alive": self.alive,
            "health": self.health,
            "exit_code": self.exit_code,
            "pid": self.pid,
            "runtime": self.runtime,
            "round": self.round,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "idle_s": self.idle_s,
            "uptime_s": self.uptime_s,
            "verify": self.verify,
            "verify_output": self.verify_output,
            "result": self.result,
            "usage": self.usage,
            "workspace": self.workspace,
            "lost": self.lost,
        }


def _pending_asks(wd: WorkDir) -> set[str]:
    """Workers with a question no human has answered yet (an ask without an answer)."""
    box = wd.shelf
    if box.empty("asks"):
        return set()
    answered = set(box.names("answers"))
    return {
        str(body["asker"])
        for name, body in shelf.json_items(box, "asks")
        if name not in answered and isinstance(body, dict) and isinstance(body.get("asker"), str)
    }


def view(paths: Paths, d: Path, now: float, waiting: set[str]) -> SessionView:
    """The session in directory `d`; `waiting` holds the workers with an unanswered ask."""
    meta, status = read_record(d / META), read_record(d / STATUS)
    if status.get("unreadable"):
        state = WorkerState.UNREADABLE
    elif not status:
        state = WorkerState.STARTING
    else:
        state = WorkerState.parse(status.get("state"))
    pid = meta.get("pid") if isinstance(meta.get("pid"), int) else None
    started = jsonio.number(meta.get("started_at"))
    if pid is not None:
        alive = is_alive(pid, meta.get("create_time"))
    else:  # a start in progress has no pid yet
        alive = (
            state is WorkerState.STARTING
            and started is not None
            and now - started < STARTING_GRACE_S
        )
    lost = bool(status.get("lost"))
    exit_code = status.get("exit_code") if isinstance(status.get("exit_code"), int) else None
    if not alive and state in LIVE_STATES:
        sup_alive = is_alive(meta.get("supervisor_pid"), meta.get("supervisor_create_time"))
        if not sup_alive:
            state, lost = WorkerState.EXITED, True  # what housekeeping will record
    try:
        output_at: float | None = (d / OUTPUT).stat().st_mtime
    except OSError:
        output_at = started
    idle = None if output_at is None else max(0.0, now - output_at)
    limits = as_dict(meta.get("limits"))
    stuck_after = jsonio.number(limits.get("stuck_after_s")) or 900.0
    if not alive:
        health = Health.DEAD
    elif d.name in waiting:
        health = Health.WAITING_ASK
    elif idle is not None and idle >= stuck_after:
        health = Health.STUCK
    else:
        health = Health.BUSY
    verdict = read_record(d / VERIFY)
    result = read_record(d / RESULT)
    usage = status.get("usage") if isinstance(status.get("usage"), dict) else None
    if usage is None and isinstance(result.get("usage"), dict):
        usage = result["usage"]
    ended = jsonio.number(status.get("ended_at"))
    return SessionView(
        id=d.name,
        state=state,
        alive=alive,
        health=health,
        exit_code=exit_code,
        pid=pid,
        runtime=meta.get("runtime"),
        round=meta.get("round"),
        started_at=started,
        ended_at=ended,
        idle_s=None if idle is None else round(idle, 1),
        uptime_s=None if started is None else round(max(0.0, (ended or now) - started), 1),
        output_at=output_at,
        verify=verdict.get("verdict") if verdict.get("verdict") in ("pass", "fail") else None,
        verify_output=verdict.get("output") if verdict.get("verdict") == "fail" else None,
        result=result if result and not result.get("unreadable") else None,
        usage=usage,
        workspace=status.get("workspace") or meta.get("workspace"),
        lost=lost,
    )


def session_dirs(paths: Paths) -> list[Path]:
    try:
        entries = sorted(os.scandir(paths.sessions), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    return [Path(e.path) for e in entries if is_safe_segment(e.name) and e.is_dir()]


def list_sessions(wd: WorkDir, now: float) -> list[SessionView]:
    """Every session on disk, sorted by id, with liveness and health."""
    dirs = session_dirs(wd.paths)
    waiting = _pending_asks(wd) if dirs else set()
    return [view(wd.paths, d, now, waiting) for d in dirs]


def get(wd: WorkDir, session_id: str, now: float) -> SessionView:
    d = session_dir(wd.paths, session_id)
    if not d.is_dir():
        raise UsageError(f"no worker {session_id!r}", "list them with `looop workers --all`")
    return view(wd.paths, d, now, _pending_asks(wd))


def live_count(wd: WorkDir, now: float) -> int:
    return sum(1 for v in list_sessions(wd, now) if v.alive)


# -- done: the worker's own report -----------------------------------------------------


def report(
    paths: Paths,
    session_id: str,
    *,
    status: str,
    summary: str | None,
    tokens: int | None,
    cost_usd: float | None,
    now: float,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
) -> dict[str, Any]:
    """`looop done`: write result.json, the worker's word on how its task went.

    Tokens: `input_tokens`/`output_tokens` as split, `tokens` as the total (alone, it
    counts toward a loop's total ceiling only: no direction is guessed)."""
    d = session_dir(paths, session_id)
    if not d.is_dir():
        raise UsageError(
            f"no worker {session_id!r}",
            "`looop done` runs inside a worker ($LOOOP_SESSION_ID), or pass --session",
        )
    if status not in RESULT_STATUSES:
        raise UsageError(f"unknown status {status!r}", f"use one of {', '.join(RESULT_STATUSES)}")
    result: dict[str, Any] = {"status": status, "summary": summary, "at": now}
    for name, value in (("tokens", tokens), ("input", input_tokens), ("output", output_tokens)):
        if value is not None and value < 0:
            raise UsageError(f"--{name}{'-tokens' if name != 'tokens' else ''} is negative")
    split = (input_tokens or 0) + (output_tokens or 0)
    if tokens is not None and split > tokens:
        raise UsageError(
            f"--tokens {tokens} is less than --input-tokens plus --output-tokens ({split})"
        )
    if tokens is not None or cost_usd is not None or split:
        usage: dict[str, Any] = {"total_tokens": tokens if tokens is not None else split}
        if input_tokens is not None or output_tokens is not None:  # a split, only when given
            usage |= {"input_tokens": input_tokens or 0, "output_tokens": output_tokens or 0}
        result["usage"] = usage | {"cost_usd": cost_usd, "source": "worker"}
    try:
        jsonio.write_json(d / RESULT, result)
    except OSError as exc:  # e.g. a read-only sandbox (codex --sandbox read-only): say so
        raise LooopError(
            f"could not write {d / RESULT}: {exc.strerror or exc}",
            "the worker runs where it may not write (a read-only sandbox); end with a final"
            " message instead: looop reads the result from the CLI's output",
        ) from None
    return result
