"""The supervisor of one worker: starts it detached, waits for it, records how it ended.

`looop worker start` runs this in a new session and returns as soon as it
reports the worker's pid; from then on the two outlive any looop process.

    1. fork once more and let the first process exit, so whoever started us
       can reap it at once and we are adopted by init;
    2. fork the worker into its own session (so its own process group), held
       at a gate until its pid and create time are in meta.json, so anything
       it runs (`looop claim` …) finds its session already on record;
    3. wait for it (with an iteration cap, counting its tool calls in output.log as
       they come, and ending its group past the cap); write status.json with its
       exit code; read the CLI's stream for usage (into status.json and
       result.json) and, when the worker never called `looop done`, a result from
       the CLI's final envelope; end whatever it left behind in its group
       (SIGTERM, then SIGKILL after the grace).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path

from looop_py import identity, jsonio
from looop_py.workers import aider, records, streams

# typing is not imported at run time: a worker's supervisor loads this at every start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def main(argv: list[str]) -> int:
    d = Path(argv[0])
    if os.fork() > 0:
        os._exit(0)
    for sig in (signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)  # no terminal, no Ctrl-C: only kill ends us
    try:
        meta: dict[str, Any] = jsonio.read_json(d / records.META)
        command, cwd = str(meta["command"]), str(meta["cwd"])
    except Exception as exc:
        _ready({"error": f"unreadable {records.META}: {exc}"})
        return 1
    gate_r, gate_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker
        _exec_worker(gate_r, gate_w, d, command, cwd)
    os.close(gate_r)
    me = os.getpid()
    created = identity.create_time(pid)
    meta.update(
        pid=pid,
        create_time=created,
        supervisor_pid=me,
        supervisor_create_time=identity.create_time(me),
    )
    jsonio.write_json(d / records.META, meta)
    jsonio.write_json(d / records.STATUS, {"state": "running", "exit_code": None})
    _ready({"pid": pid, "create_time": created, "supervisor_pid": me})
    os.close(gate_w)  # the gate opens: the worker runs
    limits = records.as_dict(meta.get("limits"))
    grace = limits.get("kill_grace_s")
    grace_s = float(grace) if isinstance(grace, int | float) else 5.0
    capped = limits.get("max_iters")
    cap = capped if isinstance(capped, int) and capped > 0 else 0
    kind = str(meta.get("usage_stream") or "")
    stopped = False
    if cap and kind in streams.READS_TURNS:
        wait_status, turns = _wait_capped(pid, d / records.OUTPUT, kind, cap, grace_s)
    elif kind == "aider":  # its own retry loop, stopped at its first retry (workers/aider.py)
        watch = aider.RetryWatch()
        # aider sleeps 0.25 s after that line before it sends again: looked at 20 times a
        # second while idle, it is stopped before its next request.
        log, retried = d / records.OUTPUT, lambda data: watch.feed(data) > 0
        wait_status, stopped = _watch(pid, log, retried, grace_s, idle_s=0.05)
        turns = None
    else:
        wait_status, turns = os.waitpid(pid, 0)[1], None
        if kind in streams.READS_TURNS:  # uncapped, counted once it ended (the report's iters)
            turns = _count_turns(d / records.OUTPUT, kind)
    ended = time.time()
    killed = (d / records.KILL).exists()
    code = os.waitstatus_to_exitcode(wait_status)
    status: dict[str, Any] = {
        "state": "killed" if killed else "exited",
        "exit_code": 128 - code if code < 0 else code,  # a signal death is 128+N, as in a shell
        "signal": -code if code < 0 else None,
        "ended_at": ended,
    }
    if stopped:
        status["stopped"] = aider.STOPPED
    if cap and turns is not None and turns > cap and not (d / records.RESULT).exists():
        why = f"iteration cap {cap} reached"
        status["stopped"] = why
        jsonio.write_json(
            d / records.RESULT,
            {"status": "blocked", "summary": why, "at": ended, "source": "looop", "iters": turns},
        )
    copy = meta.get("copy")
    if meta.get("read_only") == "copy" and isinstance(copy, str):  # nothing in it lasts
        path = Path(copy)
        if path.name == records.THROWAWAY:  # the private temp dir launch made around it
            shutil.rmtree(path.parent, ignore_errors=True)
    with contextlib.suppress(Exception):  # a broken stream must not lose the exit record
        status = _settle(d, meta, status, turns)
    # One write holds the exit and its usage, after result.json: whoever sees the worker
    # ended (a pulse, `looop run`) sees its result and usage with it.
    jsonio.write_json(d / records.STATUS, status)
    if not killed:  # `looop worker kill` ends the whole tree itself
        _end_stragglers(pid, grace_s)
    return 0


def _wait_capped(pid: int, log: Path, kind: str, cap: int, grace_s: float) -> tuple[int, int]:
    """Wait for the worker while counting its tool calls; past `cap` (the agent asks for
    one more) end its whole group. Its wait status and the tool calls counted."""
    counter = streams.TurnCounter(kind)
    wait_status, _ = _watch(pid, log, lambda data: counter.feed(data) > cap, grace_s)
    return wait_status, counter.turns


def _watch(
    pid: int, log: Path, stop: Callable[[bytes], bool], grace_s: float, idle_s: float = 0.1
) -> tuple[int, bool]:
    """Wait for the worker while feeding its new output to `stop`; once that says stop,
    end its whole group (SIGTERM, SIGKILL after the grace). Its wait status, and whether
    looop stopped it."""
    offset = 0
    last_data = time.monotonic()
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        data = _read_from(log, offset)
        offset += len(data)
        if stop(data) and not done:
            return _stop(pid, grace_s), True
        if done:
            while data:  # what it wrote last, so a count is whole
                data = _read_from(log, offset)
                offset += len(data)
                stop(data)
            return wait_status, False
        if data:
            last_data = time.monotonic()
        else:
            # While the agent is streaming, a turn can take milliseconds: look often then,
            # so the cap ends it within a turn; an idle agent every `idle_s`.
            time.sleep(0.01 if time.monotonic() - last_data < 2.0 else idle_s)


def _read_from(log: Path, offset: int) -> bytes:
    try:
        with log.open("rb") as f:
            f.seek(offset)
            return f.read(1 << 20)
    except OSError:
        return b""


def _count_turns(log: Path, kind: str) -> int | None:
    """The tool calls in a finished worker's stream; None when it is unreadable."""
    counter = streams.TurnCounter(kind)
    try:
        with log.open("rb") as f:
            while data := f.read(1 << 20):
                counter.feed(data)
    except OSError:
        return None
    return counter.feed(b"\n")  # its last line, unended


def _settle(
    d: Path, meta: dict[str, Any], status: dict[str, Any], turns: int | None
) -> dict[str, Any]:
    """Usage from the CLI's stream into result.json (and the status returned); a result
    from the CLI's final envelope when the worker never called `looop done`; the tool
    calls counted (`iters`), when looop counts them for this CLI."""
    stream = streams.read(str(meta.get("usage_stream") or ""), d / records.OUTPUT)
    result = records.read_record(d / records.RESULT)
    if not (d / records.RESULT).exists():
        result = streams.derived_result(stream, status.get("exit_code"), time.time()) or {}
    if stream.usage is not None:
        status = {**status, "usage": stream.usage}
        if result:
            worker_said = result.get("usage")
            result = {**result, "usage": stream.usage}
            if worker_said is not None:
                result["reported_usage"] = worker_said
    if result and turns is not None and "iters" not in result:
        result["iters"] = turns
    if result and meta.get("read_only") == "copy":
        result["read_only"] = (
            f"ran in a throwaway copy of {meta.get('copy_of')} (the runtime has no read-only"
            " mode); the copy was discarded"
        )
    if result and not result.get("unreadable"):
        jsonio.write_json(d / records.RESULT, result)
    return status


def _ready(message: dict[str, Any]) -> None:
    """One line to the waiting `looop worker start`, then stdout goes to /dev/null."""
    with contextlib.suppress(OSError):
        os.write(1, jsonio.dumps(message) + b"\n")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def _exec_worker(gate_r: int, gate_w: int, d: Path, command: str, cwd: str) -> None:
    try:
        os.setsid()
        os.close(gate_w)
        os.read(gate_r, 1)  # returns when the supervisor closes its end
        os.close(gate_r)
        # Python ignores SIGPIPE and friends; a shell script expects the defaults.
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(d / records.OUTPUT, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, 1024)
        os.chdir(cwd)
        os.execvp("bash", ["bash", "-c", command])  # noqa: S606 - bash is the shell
    except BaseException:
        with contextlib.suppress(Exception):
            os.write(2, traceback.format_exc().encode())
    finally:
        os._exit(127)


def _stop(pid: int, grace_s: float) -> int:
    """End the worker's group now (SIGTERM, SIGKILL after the grace); the leader's wait
    status. What else is left in the group is ended after, as for any worker."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            return wait_status
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            return os.waitpid(pid, 0)[1]
        time.sleep(0.05)


def _end_stragglers(pgid: int, grace_s: float) -> None:
    """End what the worker left running in its group: SIGTERM, then SIGKILL after the grace.

    The leader is reaped, but its group id stays taken while any member lives,
    so the id cannot name someone else's group here.
    """
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return  # nothing left
    deadline = time.monotonic() + grace_s
    while identity.group_members(pgid):
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            return
        time.sleep(0.05)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
