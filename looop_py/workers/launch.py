"""Launching a worker: a detached process under its own detached supervisor.

A worker runs in its own session and process group, under a small
supervisor (supervisor.py) that is itself detached: both outlive the `looop`
process that started them, and the supervisor records the exit code in
`status.json` when the worker ends. `start` waits only for the line in which
the supervisor reports the worker's pid.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.errors import BadWorkerRequest, Busy, WorkerRefused
from looop_py.ids import check_segment
from looop_py.locks import PulseLock
from looop_py.spend import ledger
from looop_py.workdir import cliretries
from looop_py.workdir.environ import child_env, with_agent_cli_env
from looop_py.workdir.paths import Paths
from looop_py.workers import runtimes, workspaces
from looop_py.workers.records import (
    META,
    OUTPUT,
    PROMPT,
    STATUS,
    SUPERVISOR_LOG,
    THROWAWAY,
    Session,
    live_count,
    read_record,
    view,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from looop_py.workdir.config import Config
    from looop_py.workdir.context import WorkDir

READY_TIMEOUT_S = 20.0  # how long `start` waits for the supervisor to report the worker's pid


def worker_env(
    paths: Paths,
    session_id: str,
    cwd: Path,
    config: Config,
    runtime: runtimes.Runtime | None = None,
) -> dict[str, str]:
    """A worker's environment: secrets scrubbed, but for those its runtime passes through;
    its agent CLI's own retries bounded and its non-essential traffic off (AGENT_CLI_ENV)."""
    env = child_env(
        paths,
        {
            "LOOOP_SESSION_ID": session_id,
            "LOOOP_CLAIMS_DIR": str(paths.claims),
            "LOOOP_REPORTS_DIR": str(paths.reports),
            "LOOOP_WORKSPACE": str(cwd),
            "LOOOP_SESSION_DIR": str(paths.sessions / session_id),  # where aider's files go
        },
        config=config,
        passthrough=runtime.env if runtime else (),
    )
    return with_agent_cli_env(env)


def start(
    wd: WorkDir,
    id: str,
    prompt: str,
    *,
    runtime: str | None = None,
    verify: str | None = None,
    workspace: str | None = None,
    round: str | None = None,
    loop: str | None = None,
    cwd: Path | None = None,
    read_only: bool = False,
    refuse_prose: bool = False,
    max_iters: int | None = None,
    fence: Mapping[str, str] | None = None,
    now: float,
) -> Session:
    """Launch a detached worker; refuses (WorkerRefused) when it cannot or must not.

    `cwd` runs it in a directory that already exists (a loop round's workspace);
    `read_only` uses the runtime's read-only mode when it has one (L1 loops);
    `refuse_prose` (`looop worker start`) refuses prose on a script runtime;
    `fence`: LOOOP_FENCE of the beat that started it, for its own `looop fence check`;
    `max_iters` caps its tool calls: its supervisor counts them in the CLI's stream and
    ends it past the cap (a CLI with its own flag gets it too; a shell worker reads
    LOOOP_MAX_ITERS).
    """

    config = wd.config
    session_id = check_segment(id, "worker id")
    if not prompt.strip():
        raise BadWorkerRequest("the prompt is empty", "say what the worker should do")
    rt = runtimes.resolve(config, runtime)
    env = worker_env(wd.paths, "-", wd.paths.root, config)
    check_runnable(rt.launch_template(read_only), rt.name, env)
    if rt.script and refuse_prose:
        check_script(prompt, rt.name, env)
    kind = workspace or "none"
    if kind not in workspaces.KINDS:
        raise BadWorkerRequest(
            f"unknown workspace {kind!r}", f"use one of {', '.join(workspaces.KINDS)}"
        )
    wcfg = config.workers
    wd.paths.sessions.mkdir(exist_ok=True)
    # One start at a time, so the id check and the fleet cap cannot be raced.
    lock = PulseLock(wd.paths.sessions / ".start.lock")
    if not lock.acquire(timeout_s=30):
        raise Busy("another worker start has held the lock for 30 s", "try again")
    try:
        d = wd.paths.sessions / session_id
        if d.exists():
            old = view(wd.paths, d, now, set())
            if old.alive:
                raise WorkerRefused(
                    f"worker {session_id} is alive (pid {old.pid})",
                    f"kill it first (`looop worker kill {session_id}`) or use another id",
                )
            _reap_leftovers(wd.paths, config, d)
        live = live_count(wd, now)
        if wcfg.max_live > 0 and live >= wcfg.max_live:
            raise WorkerRefused(
                f"fleet cap reached: {live} live workers (max_live = {wcfg.max_live})",
                "wait for one to finish, kill one, or raise [workers] max_live in looop.toml",
            )
        held = ledger.held(wd, now)  # checked before every worker, so over by one at most
        if held is not None:
            raise WorkerRefused(
                f"no worker starts: {held}",
                "the budget allows one again tomorrow, or raise [limits] in looop.toml",
            )
        d.mkdir()
        wt = None
        try:
            if kind == "git-worktree":
                wt = workspaces.create(wd.paths, wcfg, session_id)
            run_in = wt.path if wt else (cwd or wd.paths.root)
            ran_in = run_in
            # L1 on a runtime with no read-only mode: a throwaway copy, discarded at exit.
            copy = read_only and not rt.read_only
            if copy:
                run_in = throwaway_copy(run_in, session_id)
            prompt_file = d / PROMPT
            jsonio.atomic_write(
                prompt_file,
                runtimes.prompt_text(session_id, rt, prompt, wt.path if wt else None).encode(),
            )
            env = worker_env(wd.paths, session_id, run_in, config, rt)
            command = runtimes.launch_command(
                rt, prompt_file, read_only=read_only, max_iters=max_iters
            )
            env = cliretries.bound_pi(command, env, wd.paths.state)  # not in the workspace
            meta: dict[str, Any] = {
                "id": session_id,
                "pid": None,
                "create_time": None,
                "command": cliretries.bound_codex(command, env),
                "read_only": ("copy" if copy else "runtime") if read_only else None,
                "copy_of": str(ran_in) if copy else None,
                "copy": str(run_in) if copy else None,
                "runtime": rt.name,
                "usage_stream": rt.usage,
                "started_at": now,
                "round": round,
                "loop": loop,  # whose budget its tokens go to (spend/ledger.py)
                "verify": verify,
                "cwd": str(run_in),
                "workspace": wt.to_json() if wt else None,
                "limits": {
                    "kill_grace_s": wcfg.kill_grace_s,
                    "stuck_after_s": wcfg.stuck_after_s,
                    "max_iters": max_iters,
                },
            }
            jsonio.write_json(d / META, meta)
            jsonio.write_json(d / STATUS, {"state": "starting", "exit_code": None})
            (d / OUTPUT).touch()  # there from the start: `logs` and idle time need no race
            if max_iters is not None:
                env["LOOOP_MAX_ITERS"] = str(max_iters)
            env.update(fence or {})
            ready = _spawn_supervisor(d, env)
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


# Not copied into a throwaway copy: looop's own records and other workers' trees.
_NOT_COPIED = shutil.ignore_patterns("sessions", ".worktrees", "runs", ".venv", "node_modules")


def throwaway_copy(src: Path, session_id: str) -> Path:
    """A copy of `src` (symlinks kept as links) in a private temp dir, for an L1 worker to
    run in; the supervisor removes it when the worker ends, so nothing written there lasts."""
    dest = Path(tempfile.mkdtemp(prefix=f"looop-l1-{session_id}-")) / THROWAWAY
    shutil.copytree(src, dest, symlinks=True, ignore=_NOT_COPIED)
    return dest


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.S)
_SHELL_WORDS = {"cd", "exec", "env", "export", "set", "source", ".", "eval", "if", "for", "while"}


def check_runnable(template: str, runtime: str, env: dict[str, str]) -> None:
    """Refuse at start what would only die later: a program not on PATH, claude as root."""
    try:
        words = shlex.split(template)
    except ValueError:
        return  # bash will say what is wrong with it
    while words and _ASSIGNMENT.fullmatch(words[0]):
        words = words[1:]  # `NAME=value program …`: the program follows its environment
    program = words[0] if words else ""
    if not program or "=" in program or program in _SHELL_WORDS or "$" in program:
        return  # a command line that starts with shell syntax: bash finds the program
    if shutil.which(program, path=env.get("PATH")) is None:
        raise WorkerRefused(
            f"runtime {runtime!r} runs {program!r}, which is not on PATH",
            f"install {program}, put it on looop's PATH, or use another --runtime",
        )
    skips = "--dangerously-skip-permissions" in words
    sandboxed = env.get("IS_SANDBOX") == "1"
    if Path(program).name == "claude" and skips and os.geteuid() == 0 and not sandboxed:
        raise WorkerRefused(
            "claude refuses --dangerously-skip-permissions as root (it would exit 1 at once)",
            "run looop as a normal user; inside a throwaway container or VM, "
            "export IS_SANDBOX=1 (claude's documented switch for sandboxes)",
        )


_FIRST_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def check_script(prompt: str, runtime: str, env: dict[str, str]) -> None:
    """A script runtime runs the prompt as bash: refuse prose, whose first word is no command."""
    line = next(
        (
            ln.strip()
            for ln in prompt.splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")
        ),
        "",
    )
    word = line.split()[0] if line.split() else ""
    if not _FIRST_WORD.fullmatch(word):
        return  # a path, an assignment, a function definition, shell syntax: bash decides
    probe = subprocess.run(
        ["bash", "-c", 'type -t -- "$1" >/dev/null', "_", word],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
    )
    if probe.returncode != 0:
        raise WorkerRefused(
            f"runtime {runtime!r} runs the prompt as a bash script, and its first word"
            f" {word!r} is not a command (is this prose for an agent?)",
            "pass --runtime claude (or codex, pi, aider), or set [workers] default_runtime"
            " in looop.toml; for the shell runtime, the prompt is a script",
        )


def _spawn_supervisor(d: Path, env: dict[str, str]) -> dict[str, Any]:
    """Start the detached supervisor and wait for the line that says the worker runs."""
    package_parent = str(Path(__file__).resolve().parents[2])  # the dir holding looop_py/
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

    status = read_record(d / STATUS)
    ws = read_record(d / META).get("workspace")
    if isinstance(ws, dict) and not status.get("finalized_at"):
        with contextlib.suppress(Exception):
            workspaces.dispose(workspaces.Worktree.from_json(ws))
    shutil.rmtree(d, ignore_errors=True)
