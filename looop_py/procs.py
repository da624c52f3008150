"""Child processes under a deadline and an output cap, many at once, in one thread.

Every child starts in its own session, so its own process group. At the
deadline the whole group is killed, and so are stragglers a child leaves
behind when it exits (a background job still holding stdout would otherwise
keep us waiting). stdout is read in chunks: at most `cap + 1` bytes are kept
and the rest is only counted, so a child printing gigabytes costs a few KiB.

One selector serves all children: no thread per process, which matters on the
quiet path where starting threads would cost more than the sensors do.

A child can escape its process group with `setsid` (a daemon, `(setsid cmd &)`).
`adopting_orphans()` makes looop a child subreaper (Linux prctl) for a span:
what escapes is reparented to looop instead of init, and at the end of the
span every process looop adopted is killed and reaped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
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


# -- orphans: what a child leaves behind outside its process group ---------------------

PR_SET_CHILD_SUBREAPER = 36
_SWEEP_S = 2.0  # the most time spent ending what was adopted
_prctl: list[object] = []  # the resolved libc prctl, once per process


def _set_subreaper(on: bool) -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER): True if it took. Through _ctypes, the C half of
    ctypes (a third of the import cost), falling back to ctypes; False off Linux."""
    try:
        import _ctypes  # only while sensors run; a third of what `import ctypes` costs

        if not _prctl:
            _prctl.append(_ctypes.dlsym(_ctypes.dlopen(None), "prctl"))  # type: ignore[arg-type]
        call = getattr(_ctypes, "call_function")  # noqa: B009 - private, not in the stubs
        return bool(call(_prctl[0], (PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0)
    except (ImportError, AttributeError, OSError, TypeError):
        pass
    try:
        import ctypes  # only if _ctypes lacks call_function (a future Python)

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
    except (ImportError, AttributeError, OSError):
        return False


def _has_children() -> bool:
    """Does this process have any child at all (one syscall, nothing reaped)?"""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def children() -> set[int]:
    """The pids whose parent is this process (from /proc)."""
    me = os.getpid()
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{me}/task")
        for tid in tasks:
            with open(f"/proc/{me}/task/{tid}/children", "rb") as f:
                found.update(int(x) for x in f.read().split())
        return found
    except OSError:
        pass  # no CONFIG_PROC_CHILDREN: scan every process's parent
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.add(pid)
    return found


def end_adopted(keep: set[int]) -> int:
    """Kill and reap every child of ours not in `keep` (nor running under run_many),
    and whatever they leave in turn; returns how many were ended."""
    ended = 0
    deadline = time.monotonic() + _SWEEP_S
    while _has_children() and time.monotonic() < deadline:
        adopted = children() - keep - _running
        if not adopted:
            break
        for pid in adopted:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)  # it leads a group of its own (setsid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in adopted:
            while time.monotonic() < deadline:
                try:
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        break
                except ChildProcessError:
                    break
                time.sleep(0.002)
            ended += 1
    return ended


@contextmanager
def adopting_orphans() -> Iterator[list[int]]:
    """Adopt what children leave behind during the block; end it all at the block's end.

    Yields a list that receives the count of processes ended (for tests and logs).
    """
    keep = children() if _has_children() else set()
    adopting = _set_subreaper(True)
    ended: list[int] = []
    try:
        yield ended
    finally:
        if adopting:
            try:
                ended.append(end_adopted(keep))
            finally:
                _set_subreaper(False)
