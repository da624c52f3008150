"""Worker sessions: detached processes, tracked on disk, reaped by the beat.

A worker runs in its own session and process group, under a small
supervisor (supervisor.py) that is itself detached: both outlive the `looop`
process that started them, and the supervisor records the exit code in
`status.json` when the worker ends. psutil lives here (and is imported only
when a process has to be looked at, so the quiet beat never pays for it).

Alive means the recorded pid exists, is not a zombie, and was created when
the record says: a recycled pid is not life. A liveness check that fails for
any other reason (permissions …) counts as alive, so nothing is reaped blind.

sessions/<id>/ holds meta.json, status.json, prompt.md, output.log, and
result.json (the worker's own report), verify.json, kill.json when present.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import Busy, CorruptFile, UsageError, WorkerRefused
from looop_py.workdir.paths import Paths, check_segment, is_safe_segment

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.workdir.config import Config

META = "meta.json"
STATUS = "status.json"
PROMPT = "prompt.md"
OUTPUT = "output.log"
RESULT = "result.json"
VERIFY = "verify.json"
KILL = "kill.json"
SUPERVISOR_LOG = "supervisor.log"

LIVE_STATES = ("starting", "running")
RESULT_STATUSES = ("done", "done-with-concerns", "blocked")

CREATE_TIME_SLACK_S = 1.0  # psutil derives create times from the boot time, in whole seconds
STARTING_GRACE_S = 30.0  # a `starting` record without a pid is a start in progress this long
READY_TIMEOUT_S = 20.0  # how long `start` waits for the supervisor to report the worker's pid
SUPERVISOR_RECORD_S = 3.0  # how long `kill` waits for the supervisor to record the end


# -- processes -----------------------------------------------------------------------


def _identity(pid: int) -> tuple[bool, float] | None:
    """(is a zombie, create time) of process `pid`; None if there is no such process.

    Raises on anything else (permissions …), so callers can fail closed. On
    Linux this reads /proc/<pid>/stat directly, the way psutil computes it
    (start ticks / CLK_TCK + boot time): the quiet beat checks liveness every
    beat, and importing psutil would cost more than the check.
    """
    if _PROC:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                data = f.read()
        except (FileNotFoundError, ProcessLookupError):
            return None
        fields = data[data.rindex(b")") + 2 :].split()  # after "pid (comm) "
        return fields[0] in (b"Z", b"X"), int(fields[19]) / _clock_ticks() + _boot_time()
    import psutil

    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return proc.status() == psutil.STATUS_ZOMBIE, proc.create_time()
    except psutil.ZombieProcess:
        return True, 0.0
    except psutil.NoSuchProcess:
        return None


_PROC = sys.platform.startswith("linux") and os.path.exists("/proc/self/stat")
_cache: dict[str, float] = {}


def _clock_ticks() -> float:
    if "tck" not in _cache:
        _cache["tck"] = float(os.sysconf("SC_CLK_TCK"))
    return _cache["tck"]


def _boot_time() -> float:
    if "btime" not in _cache:
        with open("/proc/stat", "rb") as f:
            line = next(x for x in f if x.startswith(b"btime"))
        _cache["btime"] = float(line.split()[1])
    return _cache["btime"]


def create_time(pid: int) -> float | None:
    """When process `pid` was created; None if there is no such (live) process."""
    found = _identity(pid)
    return None if found is None or found[0] else found[1]


def is_alive(pid: Any, created: Any) -> bool:
    """Is the process recorded as (pid, create time) still running? Errors count as alive."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if not isinstance(created, int | float):
        return False
    try:
        found = _identity(pid)
    except Exception:
        return True  # fail closed: never reap what we could not look at
    if found is None or found[0]:
        return False  # gone, or a zombie: it has exited
    # A different create time means the pid was recycled: that process is not ours.
    return abs(found[1] - float(created)) <= CREATE_TIME_SLACK_S


def _descendants(pid: int) -> list[tuple[int, float]]:
    """(pid, create time) of every descendant, taken before signalling the tree."""
    import psutil

    try:
        return [(c.pid, c.create_time()) for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def group_members(pgid: int) -> list[tuple[int, float]]:
    """(pid, create time) of the live processes in process group `pgid` (zombies excluded).

    A zombie is not reaped everywhere (a container's init may never do it), so
    "the group still exists" cannot be asked of the kernel; it is counted here.
    """
    import psutil

    found: list[tuple[int, float]] = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) != pgid:
                continue
            with proc.oneshot():
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append((proc.pid, proc.create_time()))
        except (psutil.Error, OSError):
            continue
    return found


def _signal(pid: int, created: float, sig: int) -> None:
    if is_alive(pid, created):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# -- records -------------------------------------------------------------------------


def session_dir(paths: Paths, session_id: str) -> Path:
    return paths.sessions / check_segment(session_id, "worker id")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = jsonio.read_json(path, {})
    except (CorruptFile, OSError):
        return {"unreadable": True}
    return data if isinstance(data, dict) else {"unreadable": True}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


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
    state: str  # starting | running | exited | killed | unknown
    alive: bool
    health: str  # busy | waiting-ask | stuck | dead
    exit_code: int | None = None
    pid: int | None = None
    runtime: str | None = None
    round: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    idle_s: float | None = None
    uptime_s: float | None = None
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


def _pending_asks(paths: Paths) -> set[str]:
    """Workers with a question no human has answered yet (asks/<id>.json, no answers/<id>.json)."""
    waiting: set[str] = set()
    try:
        entries = list(os.scandir(paths.asks))
    except FileNotFoundError:
        return waiting
    for entry in entries:
        stem = entry.name.removesuffix(".json")
        if stem == entry.name or entry.name.startswith("."):
            continue
        if (paths.answers / entry.name).exists():
            continue
        body = _read(Path(entry.path))
        who = body.get("asker")
        if isinstance(who, str):
            waiting.add(who)
    return waiting


def _view(paths: Paths, d: Path, now: float, waiting: set[str]) -> SessionView:
    meta, status = _read(d / META), _read(d / STATUS)
    state = str(status.get("state") or ("unknown" if status else "starting"))
    if status.get("unreadable"):
        state = "unreadable"
    pid = meta.get("pid") if isinstance(meta.get("pid"), int) else None
    started = _num(meta.get("started_at"))
    if pid is not None:
        alive = is_alive(pid, meta.get("create_time"))
    else:  # a start in progress has no pid yet
        alive = state == "starting" and started is not None and now - started < STARTING_GRACE_S
    lost = bool(status.get("lost"))
    exit_code = status.get("exit_code") if isinstance(status.get("exit_code"), int) else None
    if not alive and state in LIVE_STATES:
        sup_alive = is_alive(meta.get("supervisor_pid"), meta.get("supervisor_create_time"))
        if not sup_alive:
            state, lost = "exited", True  # what housekeeping will record
    try:
        idle: float | None = max(0.0, now - (d / OUTPUT).stat().st_mtime)
    except OSError:
        idle = None if started is None else max(0.0, now - started)
    limits = _dict(meta.get("limits"))
    stuck_after = _num(limits.get("stuck_after_s")) or 900.0
    if not alive:
        health = "dead"
    elif d.name in waiting:
        health = "waiting-ask"
    elif idle is not None and idle >= stuck_after:
        health = "stuck"
    else:
        health = "busy"
    verdict = _read(d / VERIFY)
    result = _read(d / RESULT)
    usage = status.get("usage") if isinstance(status.get("usage"), dict) else None
    if usage is None and isinstance(result.get("usage"), dict):
        usage = result["usage"]
    ended = _num(status.get("ended_at"))
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
        verify=verdict.get("verdict") if verdict.get("verdict") in ("pass", "fail") else None,
        verify_output=verdict.get("output") if verdict.get("verdict") == "fail" else None,
        result=result if result and not result.get("unreadable") else None,
        usage=usage,
        workspace=status.get("workspace") or meta.get("workspace"),
        lost=lost,
    )


def _session_dirs(paths: Paths) -> list[Path]:
    try:
        entries = sorted(os.scandir(paths.sessions), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    return [Path(e.path) for e in entries if is_safe_segment(e.name) and e.is_dir()]


def list_sessions(paths: Paths, now: float) -> list[SessionView]:
    """Every session on disk, sorted by id, with liveness and health."""
    dirs = _session_dirs(paths)
    waiting = _pending_asks(paths) if dirs else set()
    return [_view(paths, d, now, waiting) for d in dirs]


def get(paths: Paths, session_id: str, now: float) -> SessionView:
    d = session_dir(paths, session_id)
    if not d.is_dir():
        raise UsageError(f"no worker {session_id!r}", "list them with `looop workers --all`")
    return _view(paths, d, now, _pending_asks(paths))


def live_count(paths: Paths, now: float) -> int:
    return sum(1 for v in list_sessions(paths, now) if v.alive)


# -- start ---------------------------------------------------------------------------


def worker_env(paths: Paths, session_id: str, cwd: Path) -> dict[str, str]:
    from looop_py.workdir.environ import child_env

    return child_env(
        paths,
        {
            "LOOOP_SESSION_ID": session_id,
            "LOOOP_CLAIMS_DIR": str(paths.claims),
            "LOOOP_REPORTS_DIR": str(paths.reports),
            "LOOOP_WORKSPACE": str(cwd),
        },
    )


def start(
    paths: Paths,
    config: Config,
    id: str,
    prompt: str,
    *,
    runtime: str | None = None,
    verify: str | None = None,
    workspace: str | None = None,
    round: str | None = None,
    cwd: Path | None = None,
    read_only: bool = False,
    now: float,
) -> Session:
    """Launch a detached worker; refuses (WorkerRefused) when it cannot or must not.

    `cwd` runs it in a directory that already exists (a loop round's workspace);
    `read_only` uses the runtime's read-only mode when it has one (L1 loops).
    """
    from looop_py.locks import PulseLock
    from looop_py.workers import runtimes, workspaces

    session_id = check_segment(id, "worker id")
    if not prompt.strip():
        raise WorkerRefused("the prompt is empty", "say what the worker should do")
    rt = runtimes.resolve(config, runtime)
    kind = workspace or "none"
    if kind not in workspaces.KINDS:
        raise WorkerRefused(
            f"unknown workspace {kind!r}", f"use one of {', '.join(workspaces.KINDS)}"
        )
    wcfg = config.workers
    paths.sessions.mkdir(exist_ok=True)
    # One start at a time, so the id check and the fleet cap cannot be raced.
    lock = PulseLock(paths.sessions / ".start.lock")
    if not lock.acquire(timeout_s=30):
        raise Busy("another worker start has held the lock for 30 s", "try again")
    try:
        d = paths.sessions / session_id
        if d.exists():
            old = _view(paths, d, now, set())
            if old.alive:
                raise WorkerRefused(
                    f"worker {session_id} is alive (pid {old.pid})",
                    f"kill it first (`looop worker kill {session_id}`) or use another id",
                )
            _reap_leftovers(paths, config, d)
        live = live_count(paths, now)
        if wcfg.max_live > 0 and live >= wcfg.max_live:
            raise WorkerRefused(
                f"fleet cap reached: {live} live workers (max_live = {wcfg.max_live})",
                "wait for one to finish, kill one, or raise [workers] max_live in looop.toml",
            )
        d.mkdir()
        wt = None
        try:
            if kind == "git-worktree":
                wt = workspaces.create(paths, wcfg, session_id)
            run_in = wt.path if wt else (cwd or paths.root)
            prompt_file = d / PROMPT
            jsonio.atomic_write(
                prompt_file,
                runtimes.prompt_text(session_id, rt, prompt, wt.path if wt else None).encode(),
            )
            meta: dict[str, Any] = {
                "id": session_id,
                "pid": None,
                "create_time": None,
                "command": runtimes.launch_command(rt, prompt_file, read_only=read_only),
                "read_only": ("runtime" if rt.read_only else "instruction") if read_only else None,
                "runtime": rt.name,
                "usage_stream": rt.usage,
                "started_at": now,
                "round": round,
                "verify": verify,
                "cwd": str(run_in),
                "workspace": wt.to_json() if wt else None,
                "limits": {
                    "kill_grace_s": wcfg.kill_grace_s,
                    "stuck_after_s": wcfg.stuck_after_s,
                },
            }
            jsonio.write_json(d / META, meta)
            jsonio.write_json(d / STATUS, {"state": "starting", "exit_code": None})
            (d / OUTPUT).touch()  # there from the start: `logs` and idle time need no race
            ready = _spawn_supervisor(d, worker_env(paths, session_id, run_in))
        except BaseException as exc:
            ended = {"state": "exited", "exit_code": None, "ended_at": now, "error": str(exc)}
            with contextlib.suppress(OSError):
                jsonio.write_json(d / STATUS, ended)
            if wt is not None:
                workspaces.dispose(wt)
            raise
    finally:
        lock.release()
    return Session(
        id=session_id,
        dir=d,
        pid=ready["pid"],
        create_time=ready["create_time"],
        runtime=rt.name,
        command=meta["command"],
        cwd=run_in,
        started_at=now,
        round=round,
        verify=verify,
        workspace=meta["workspace"],
    )


def _spawn_supervisor(d: Path, env: dict[str, str]) -> dict[str, Any]:
    """Start the detached supervisor and wait for the line that says the worker runs."""
    package_parent = str(Path(__file__).resolve().parent.parent)
    code = (
        f"import sys; sys.path.insert(0, {package_parent!r}); "
        "from looop_py.workers.supervisor import main; sys.exit(main(sys.argv[1:]))"
    )
    with (d / SUPERVISOR_LOG).open("ab") as log:
        popen = subprocess.Popen(
            [sys.executable, "-c", code, str(d)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=d,
            start_new_session=True,  # its own session: no terminal, no signals from ours
        )
    assert popen.stdout is not None
    line = b""
    with selectors.DefaultSelector() as sel:
        sel.register(popen.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(popen.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    popen.stdout.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=5)  # it forks its worker-watching half and exits at once
    try:
        ready = jsonio.loads(line) if line.strip() else {}
    except jsonio.JSONDecodeError:
        ready = {}
    if not isinstance(ready, dict) or not isinstance(ready.get("pid"), int):
        why = ready.get("error") if isinstance(ready, dict) else None
        log_tail = (d / SUPERVISOR_LOG).read_bytes()[-500:].decode("utf-8", "replace").strip()
        raise WorkerRefused(
            f"the worker did not start: {why or log_tail or 'no word from its supervisor'}",
            f"see {d / SUPERVISOR_LOG}",
        )
    return ready


def _reap_leftovers(paths: Paths, config: Config, d: Path) -> None:
    """A dead session's id is being reused: settle its worktree, then remove its record."""
    from looop_py.workers import workspaces

    status = _read(d / STATUS)
    ws = _read(d / META).get("workspace")
    if isinstance(ws, dict) and not status.get("finalized_at"):
        with contextlib.suppress(Exception):
            workspaces.dispose(_worktree(ws))
    shutil.rmtree(d, ignore_errors=True)


def _worktree(ws: dict[str, Any]) -> Any:
    from looop_py.workers.workspaces import Worktree

    return Worktree(Path(ws["repo"]), Path(ws["path"]), str(ws["branch"]))


# -- kill ----------------------------------------------------------------------------


@dataclass(frozen=True)
class KillResult:
    id: str
    was_alive: bool
    state: str
    exit_code: int | None
    forced: bool = False  # it needed SIGKILL


def kill(paths: Paths, id: str, *, reason: str | None = None) -> KillResult:
    """End a worker and everything it started: SIGTERM, then SIGKILL after the grace."""
    d = session_dir(paths, id)
    if not d.is_dir():
        raise UsageError(f"no worker {id!r}", "list them with `looop workers --all`")
    meta = _read(d / META)
    pid, created = meta.get("pid"), meta.get("create_time")
    if not is_alive(pid, created):
        st = _read(d / STATUS)
        return KillResult(id, False, str(st.get("state", "unknown")), st.get("exit_code"))
    assert isinstance(pid, int) and isinstance(created, int | float)
    jsonio.write_json(d / KILL, {"reason": reason, "at": time.time()})
    limits = _dict(meta.get("limits"))
    grace = _num(limits.get("kill_grace_s"))
    grace = 5.0 if grace is None else grace
    tree = [(pid, float(created)), *_descendants(pid)]
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
        status = _read(d / STATUS)
        if status.get("state") not in LIVE_STATES:
            return status
        sup_alive = is_alive(meta.get("supervisor_pid"), meta.get("supervisor_create_time"))
        if not sup_alive or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    status = {"state": "killed", "exit_code": None, "ended_at": time.time(), "lost": True}
    jsonio.write_json(d / STATUS, status)
    return status


# -- done: the worker's own report -------------------------------------------------------


def report(
    paths: Paths,
    session_id: str,
    *,
    status: str,
    summary: str | None,
    tokens: int | None,
    cost_usd: float | None,
    now: float,
) -> dict[str, Any]:
    """`looop done`: write result.json, the worker's word on how its task went."""
    d = session_dir(paths, session_id)
    if not d.is_dir():
        raise UsageError(
            f"no worker {session_id!r}",
            "`looop done` runs inside a worker ($LOOOP_SESSION_ID), or pass --session",
        )
    if status not in RESULT_STATUSES:
        raise UsageError(f"unknown status {status!r}", f"use one of {', '.join(RESULT_STATUSES)}")
    result: dict[str, Any] = {"status": status, "summary": summary, "at": now}
    if tokens is not None or cost_usd is not None:
        result["usage"] = {"total_tokens": tokens, "cost_usd": cost_usd, "source": "worker"}
    jsonio.write_json(d / RESULT, result)
    return result


# -- housekeeping: the start of every beat ---------------------------------------------------


def housekeeping(
    paths: Paths, config: Config, now: float, *, ttl_s: float | None = None
) -> list[dict[str, Any]]:
    """Record lost workers, verify and settle dead ones, prune old records, reap claims.

    A settled session is pruned once it has been dead for `ttl_s` (default
    [workers] session_ttl_s; `looop prune` passes 0). Returns one event dict
    per thing done ({"event": name, ...}); the pulse logs them.
    """
    events: list[dict[str, Any]] = []
    dirs = _session_dirs(paths)
    if dirs:
        ttl = config.workers.session_ttl_s if ttl_s is None else ttl_s
        budget_end = time.monotonic() + config.workers.verify_budget_s
        for d in dirs:
            events += _housekeep_one(paths, config, d, now, budget_end, ttl_s=ttl)
    if _has_json(paths.claims):
        from looop_py.claims import lease as claims

        events += claims.reap(paths, now)
    return events


def _has_json(directory: Path) -> bool:
    try:
        with os.scandir(directory) as it:
            return any(e.name.endswith(".json") and not e.name.startswith(".") for e in it)
    except FileNotFoundError:
        return False


def _housekeep_one(
    paths: Paths, config: Config, d: Path, now: float, budget_end: float, *, ttl_s: float
) -> list[dict[str, Any]]:
    meta, status = _read(d / META), _read(d / STATUS)
    if meta.get("unreadable") or status.get("unreadable"):
        return []  # never remove what cannot be read
    sid = d.name
    if isinstance(meta.get("pid"), int):
        if is_alive(meta["pid"], meta.get("create_time")):
            return []
    elif status.get("state") == "starting":
        started = _num(meta.get("started_at"))
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
            events.append(_run_verify(paths, config, d, verify, now))
        events.append(_finalize(paths, d, meta, status, now))
        return events
    ended = _num(status.get("ended_at")) or _num(status.get("finalized_at")) or now
    if now - ended > ttl_s:
        shutil.rmtree(d, ignore_errors=True)
        events.append({"event": "session_pruned", "id": sid})
    return events


def _run_verify(paths: Paths, config: Config, d: Path, cmd: str, now: float) -> dict[str, Any]:
    from looop_py import procs
    from looop_py.workdir.environ import child_env

    env = child_env(paths, {"LOOOP_VERIFY_SESSION": d.name})
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
    paths: Paths, d: Path, meta: dict[str, Any], status: dict[str, Any], now: float
) -> dict[str, Any]:
    """Once per dead session: usage from its output, its worktree settled."""
    from looop_py.workers import runtimes, workspaces

    usage = runtimes.usage_from_output(str(meta.get("usage_stream") or ""), d / OUTPUT)
    status = {**status, "finalized_at": now}
    if usage is not None:
        status["usage"] = usage
    ws = meta.get("workspace")
    if isinstance(ws, dict):
        try:
            status["workspace"] = workspaces.dispose(_worktree(ws))
        except Exception as exc:  # git broke: keep the worktree, say why
            status["workspace"] = {**ws, "kept": True, "reason": f"dispose failed: {exc}"}
    jsonio.write_json(d / STATUS, status)
    result = _read(d / RESULT)
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


def kept_worktrees(paths: Paths, config: Config) -> list[dict[str, Any]]:
    """Worktrees left on disk because they hold work, with the session that made each."""
    from looop_py.workers import workspaces

    out: list[dict[str, Any]] = []
    root = workspaces.root(paths, config.workers)
    for wid in workspaces.kept(paths, config.workers):
        status = _read(paths.sessions / wid / STATUS) if is_safe_segment(wid) else {}
        ws = _dict(status.get("workspace"))
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
