"""Child processes under a deadline and an output cap, many at once, in one thread.

Every child starts in its own session, so its own process group. At the
deadline the whole group is killed, and so are stragglers a child leaves
behind when it exits (a background job still holding stdout would otherwise
keep us waiting). stdout is read in chunks: at most `cap + 1` bytes are kept
and the rest is only counted, so a child printing gigabytes costs a few KiB.

One selector serves all children: no thread per process, which matters on the
quiet path where starting threads would cost more than the sensors do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

_POLL_S = 0.05  # how often children are checked for having exited while silent
_EXIT_POLL_S = 0.002  # … once their pipes have closed and only the exit is awaited
_GRACE_S = 0.25  # how long pipes may stay open after a child and its group are gone
_READ = 65536

RC_TIMEOUT = 124


@dataclass(frozen=True)
class Job:
    key: str
    argv: list[str]
    timeout_s: float
    cap: int
    stdin: Path | None = None
    stderr_tail: int = 1024


@dataclass(frozen=True)
class Result:
    returncode: int | None  # None: it never started (see spawn_errno)
    stdout: bytes  # at most cap + 1 bytes
    stdout_bytes: int  # everything it printed
    stderr_tail: bytes
    timed_out: bool = False
    spawn_errno: int | None = None
    duration_s: float = 0.0

    @property
    def exit_code(self) -> int:
        """The shell's convention: 124 timeout, 128+N signal death, 126/127 spawn failure."""
        if self.timed_out:
            return RC_TIMEOUT
        if self.returncode is None:
            return 127 if self.spawn_errno in (errno.ENOENT, errno.ENOTDIR) else 126
        return 128 - self.returncode if self.returncode < 0 else self.returncode


class _Child:
    __slots__ = (
        "deadline",
        "err",
        "gone_at",
        "job",
        "open",
        "out",
        "out_total",
        "popen",
        "started",
    )

    def __init__(self, job: Job, popen: subprocess.Popen[bytes], started: float) -> None:
        self.job = job
        self.popen = popen
        self.started = started
        self.deadline = started + job.timeout_s
        self.out = bytearray()
        self.out_total = 0
        self.err = bytearray()
        self.open = 2
        self.gone_at: float | None = None

    def feed(self, is_out: bool, chunk: bytes) -> None:
        if is_out:
            self.out_total += len(chunk)
            room = self.job.cap + 1 - len(self.out)
            if room > 0:
                self.out += chunk[:room]
        else:
            self.err += chunk
            keep = self.job.stderr_tail
            if len(self.err) > 4 * keep:
                del self.err[:-keep]


# Process groups running right now, so an interrupted caller can end them all.
_running: set[int] = set()


def kill_running() -> None:
    """Kill every child group still running (the caller was interrupted)."""
    for pgid in list(_running):
        _kill_group(pgid)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _has_exited(pid: int) -> bool:
    """True once the process has exited, without reaping it (WNOWAIT)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _spawn(job: Job, cwd: Path, env: Mapping[str, str]) -> _Child | Result:
    started = time.monotonic()
    try:
        stdin = job.stdin.open("rb") if job.stdin is not None else subprocess.DEVNULL
    except OSError as exc:
        return Result(None, b"", 0, str(exc).encode(), spawn_errno=exc.errno or errno.EIO)
    try:
        popen = subprocess.Popen(
            job.argv,
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return Result(None, b"", 0, str(exc).encode(), spawn_errno=exc.errno or errno.EIO)
    finally:
        if not isinstance(stdin, int):
            stdin.close()
    _running.add(popen.pid)
    return _Child(job, popen, started)


def _finish(child: _Child, sel: selectors.BaseSelector, timed_out: bool) -> Result:
    popen = child.popen
    for stream in (popen.stdout, popen.stderr):
        assert stream is not None
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(stream)
        stream.close()
    # The leader is a zombie or still running, so its pid (the group id) cannot
    # have been reused yet: killing the group here is safe, and ends stragglers.
    _kill_group(popen.pid)
    _running.discard(popen.pid)
    popen.wait()
    return Result(
        popen.returncode,
        bytes(child.out),
        child.out_total,
        bytes(child.err[-child.job.stderr_tail :]) if child.job.stderr_tail else b"",
        timed_out=timed_out,
        duration_s=time.monotonic() - child.started,
    )


def run_many(
    jobs: Iterable[Job], *, cwd: Path, env: Mapping[str, str], concurrency: int = 8
) -> dict[str, Result]:
    """Run every job, at most `concurrency` at once; results by job key."""
    queue = list(jobs)
    queue.reverse()
    live: list[_Child] = []
    results: dict[str, Result] = {}
    sel = selectors.DefaultSelector()
    try:
        while queue or live:
            while queue and len(live) < max(1, concurrency):
                job = queue.pop()
                spawned = _spawn(job, cwd, env)
                if isinstance(spawned, Result):
                    results[job.key] = spawned
                    continue
                live.append(spawned)
                sel.register(spawned.popen.stdout, selectors.EVENT_READ, (spawned, True))  # type: ignore[arg-type]
                sel.register(spawned.popen.stderr, selectors.EVENT_READ, (spawned, False))  # type: ignore[arg-type]
            if not live:
                continue
            now = time.monotonic()
            poll = _EXIT_POLL_S if any(c.open == 0 for c in live) else _POLL_S
            wait = max(0.0, min(poll, min(c.deadline for c in live) - now))
            for key, _ in sel.select(wait):
                child, is_out = key.data
                chunk = os.read(key.fd, _READ)
                if chunk:
                    child.feed(is_out, chunk)
                else:
                    sel.unregister(key.fileobj)
                    child.open -= 1
            now = time.monotonic()
            for child in list(live):
                done = timed_out = now >= child.deadline
                if not done and _has_exited(child.popen.pid):
                    if child.open == 0:
                        done = True
                    elif child.gone_at is None:
                        # It exited but something in its group still holds a pipe.
                        child.gone_at = now
                        _kill_group(child.popen.pid)
                    elif now - child.gone_at > _GRACE_S:
                        done = True  # held open from outside its group (setsid)
                if done:
                    live.remove(child)
                    results[child.job.key] = _finish(child, sel, timed_out)
    finally:
        for child in live:  # interrupted: leave nothing running
            results[child.job.key] = _finish(child, sel, timed_out=True)
        sel.close()
    return results


def run(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    cap: int,
    stdin: Path | None = None,
    stderr_tail: int = 1024,
) -> Result:
    job = Job("", argv, timeout_s, cap, stdin=stdin, stderr_tail=stderr_tail)
    return run_many([job], cwd=cwd, env=env, concurrency=1)[""]
