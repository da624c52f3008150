"""Child processes under a deadline and an output cap, many at once, in one thread.

Every child starts in its own session, so its own process group. At the
deadline the whole group is killed, and so are stragglers a child leaves
behind when it exits (a background job still holding stdout would otherwise
keep us waiting). stdout is read in chunks: at most `cap + 1` bytes are kept
and the rest is only counted, so a child printing gigabytes costs a few KiB.

One poll object serves all children: no thread per process, which matters on
the quiet path where starting threads would cost more than the sensors do.
Children whose working directory is this process's own start with
`os.posix_spawn` (a vfork and an exec, and no `subprocess` import; a
`#!/usr/bin/env NAME` script execs NAME at once, shebang.py); any other
directory goes through `subprocess.Popen`, which can change it in the child.

A child can escape its process group with `setsid`: orphans.py ends what escapes.
"""

from __future__ import annotations

import os
import select
import time

from looop_py import shebang

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterable, Mapping
    from pathlib import Path
    from signal import SIGKILL as SIGKILL  # noqa: PLC0414 - re-exported for orphans.py
    from signal import SIGPIPE, SIGXFSZ
    from typing import Final
else:
    # The C half of `signal`: its Python wrapper builds IntEnums (enum, ~3 ms)
    # that the quiet beat never uses.
    try:
        from _signal import SIGKILL, SIGPIPE, SIGXFSZ
    except ImportError:  # an interpreter without it
        from signal import SIGKILL, SIGPIPE, SIGXFSZ

_POLL_S = 0.05  # how often children are checked for having exited while silent
_EXIT_POLL_S = 0.002  # … once their pipes have closed and only the exit is awaited
_GRACE_S = 0.25  # how long pipes may stay open after a child and its group are gone
_READ = 65536

RC_TIMEOUT = 124


# Job and Result are plain classes, not dataclasses: a quiet beat makes them and
# must not import `dataclasses` (it pulls in inspect, ast and dis). `Final` keeps
# their fields read-only for the type checker.


class Job:
    __match_args__ = __slots__ = ("key", "argv", "timeout_s", "cap", "stdin", "stderr_tail")
    key: Final[str]
    argv: Final[list[str]]
    timeout_s: Final[float]
    cap: Final[int]
    stdin: Final[Path | None]
    stderr_tail: Final[int]

    def __init__(  # noqa: PLR0917 - positional, as a dataclass's would be
        self,
        key: str,
        argv: list[str],
        timeout_s: float,
        cap: int,
        stdin: Path | None = None,
        stderr_tail: int = 1024,
    ) -> None:
        self.key = key
        self.argv = argv
        self.timeout_s = timeout_s
        self.cap = cap
        self.stdin = stdin
        self.stderr_tail = stderr_tail

    def __repr__(self) -> str:
        return _repr(self)


class Result:
    __match_args__ = __slots__ = (  # the fields, in their positional order
        "returncode",
        "stdout",
        "stdout_bytes",
        "stderr_tail",
        "timed_out",
        "spawn_errno",
        "duration_s",
    )
    returncode: Final[int | None]  # None: it never started (see spawn_errno)
    stdout: Final[bytes]  # at most cap + 1 bytes
    stdout_bytes: Final[int]  # everything it printed
    stderr_tail: Final[bytes]
    timed_out: Final[bool]
    spawn_errno: Final[int | None]
    duration_s: Final[float]

    def __init__(  # noqa: PLR0917 - positional, as a dataclass's would be
        self,
        returncode: int | None,
        stdout: bytes,
        stdout_bytes: int,
        stderr_tail: bytes,
        timed_out: bool = False,
        spawn_errno: int | None = None,
        duration_s: float = 0.0,
    ) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stdout_bytes = stdout_bytes
        self.stderr_tail = stderr_tail
        self.timed_out = timed_out
        self.spawn_errno = spawn_errno
        self.duration_s = duration_s

    def __repr__(self) -> str:
        return _repr(self)

    @property
    def exit_code(self) -> int:
        """The shell's convention: 124 timeout, 128+N signal death, 126/127 spawn failure."""
        if self.timed_out:
            return RC_TIMEOUT
        if self.returncode is None:
            import errno  # a child that never started: errno is not loaded for the rest

            return 127 if self.spawn_errno in (errno.ENOENT, errno.ENOTDIR) else 126
        return 128 - self.returncode if self.returncode < 0 else self.returncode


def _repr(obj: Job | Result) -> str:
    inner = ", ".join(f"{name}={getattr(obj, name)!r}" for name in obj.__match_args__)
    return f"{type(obj).__qualname__}({inner})"


class _Child:
    __slots__ = (
        "deadline",
        "err",
        "exit_fd",
        "fds",
        "gone_at",
        "job",
        "out",
        "out_total",
        "pid",
        "popen",
        "started",
    )

    def __init__(
        self,
        job: Job,
        pid: int,
        fds: tuple[int, int],
        started: float,
        popen: subprocess.Popen[bytes] | None = None,
    ) -> None:
        self.job = job
        self.pid = pid
        self.fds = list(fds)  # stdout, stderr: the ends still open
        self.popen = popen  # set when Popen started it (it then reaps it too)
        self.started = started
        self.deadline = started + job.timeout_s
        self.out = bytearray()
        self.out_total = 0
        self.err = bytearray()
        self.gone_at: float | None = None
        self.exit_fd: int | None = None  # polls readable once it exits (a pidfd)

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

    def reap(self) -> int:
        """Wait for the (already killed or exited) child; its returncode, -N for signal N."""
        if self.popen is not None:
            return int(self.popen.wait())
        while True:
            try:
                _, status = os.waitpid(self.pid, 0)
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
            except ChildProcessError:
                return -SIGKILL  # reaped by someone else (a subreaper sweep): it was killed
            return os.waitstatus_to_exitcode(status)


# Process groups running right now, so an interrupted caller can end them all
# (and orphans.py can tell what it adopted from what run_many still runs).
RUNNING: set[int] = set()


def kill_running() -> None:
    """Kill every child group still running (the caller was interrupted)."""
    for pgid in list(RUNNING):
        _kill_group(pgid)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _has_exited(pid: int) -> bool:
    """True once the process has exited, without reaping it (WNOWAIT)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _spawn(
    job: Job, cwd: str | os.PathLike[str], env: Mapping[str, str], found: dict[str, str]
) -> _Child | Result:
    started = time.monotonic()
    try:
        stdin = os.open(job.stdin if job.stdin is not None else os.devnull, os.O_RDONLY)
    except OSError as exc:
        return _unstarted(exc)
    try:
        if os.fspath(cwd) == os.getcwd():
            exe = shebang.exec_path(job.argv[0], env), job.argv
            if (direct := shebang.direct(*exe, env, found)) is not None:  # no env first
                try:
                    return _posix_spawn(job, direct, env, stdin, started)
                except OSError:
                    pass  # NAME would not run: exec the script as it is, and env says why
            return _posix_spawn(job, exe, env, stdin, started)
        return _popen(job, cwd, env, stdin, started)
    except OSError as exc:
        return _unstarted(exc)
    finally:
        os.close(stdin)


def _unstarted(exc: OSError) -> Result:
    """The result of a child that could not start (errno loaded only then)."""
    import errno  # a child that could not start: the error path only

    return Result(None, b"", 0, str(exc).encode(), spawn_errno=exc.errno or errno.EIO)


def _posix_spawn(
    job: Job, exe: tuple[str, list[str]], env: Mapping[str, str], stdin: int, started: float
) -> _Child:
    """vfork + exec of `exe` (path, argv) in a new session, the pipes on 1 and 2, SIGPIPE
    and SIGXFSZ at their defaults (Python ignores them, and an ignored signal survives
    exec)."""
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    try:
        actions = [
            (os.POSIX_SPAWN_DUP2, stdin, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
        ]
        pid = os.posix_spawn(
            *exe,
            env,
            file_actions=actions,
            setsid=True,
            setsigdef=(SIGPIPE, SIGXFSZ),
        )
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    RUNNING.add(pid)
    return _Child(job, pid, (out_r, err_r), started)


def _popen(
    job: Job, cwd: str | os.PathLike[str], env: Mapping[str, str], stdin: int, started: float
) -> _Child:
    import subprocess  # only for a child that runs in another directory than looop's

    popen = subprocess.Popen(
        job.argv,
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert popen.stdout is not None and popen.stderr is not None
    # The pipes are read by descriptor here; the file objects only hold them open.
    fds = (os.dup(popen.stdout.fileno()), os.dup(popen.stderr.fileno()))
    popen.stdout.close()
    popen.stderr.close()
    RUNNING.add(popen.pid)
    return _Child(job, popen.pid, fds, started, popen)


def _watch_exit(pid: int) -> int | None:
    """A pidfd: it polls readable once `pid` exits, so the loop wakes then (not on a timer)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or not allowed: _EXIT_POLL_S
        return None


def _unwatch(child: _Child, poller: select.poll) -> None:
    if child.exit_fd is not None:
        poller.unregister(child.exit_fd)
        os.close(child.exit_fd)
        child.exit_fd = None


def _finish(child: _Child, poller: select.poll, timed_out: bool) -> Result:
    _unwatch(child, poller)
    for fd in child.fds:
        poller.unregister(fd)
        os.close(fd)
    child.fds.clear()
    # The leader is a zombie or still running, so its pid (the group id) cannot
    # have been reused yet: killing the group here is safe, and ends stragglers.
    _kill_group(child.pid)
    RUNNING.discard(child.pid)
    returncode = child.reap()
    return Result(
        returncode,
        bytes(child.out),
        child.out_total,
        bytes(child.err[-child.job.stderr_tail :]) if child.job.stderr_tail else b"",
        timed_out=timed_out,
        duration_s=time.monotonic() - child.started,
    )


def run_many(
    jobs: Iterable[Job],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    concurrency: int = 8,
    meanwhile: Callable[[], object] | None = None,
) -> dict[str, Result]:
    """Run every job, at most `concurrency` at once; results by job key.

    `meanwhile` is called once, after the first jobs started and before any is waited
    on: work that overlaps theirs (if it raises, the jobs are killed)."""
    queue = list(jobs)
    queue.reverse()
    live: list[_Child] = []
    results: dict[str, Result] = {}
    poller = select.poll()
    by_fd: dict[int, tuple[_Child, bool]] = {}
    exits: dict[int, _Child] = {}  # pidfd -> its child
    found: dict[str, str] = {}  # a #!/usr/bin/env NAME -> NAME on PATH, for these jobs
    try:
        while queue or live:
            while queue and len(live) < max(1, concurrency):
                job = queue.pop()
                spawned = _spawn(job, cwd, env, found)
                if isinstance(spawned, Result):
                    results[job.key] = spawned
                    continue
                live.append(spawned)
                for fd, is_out in zip(spawned.fds, (True, False), strict=True):
                    poller.register(fd, select.POLLIN)
                    by_fd[fd] = (spawned, is_out)
                if (exit_fd := _watch_exit(spawned.pid)) is not None:
                    spawned.exit_fd, exits[exit_fd] = exit_fd, spawned
                    poller.register(exit_fd, select.POLLIN)
            if meanwhile is not None:
                call, meanwhile = meanwhile, None
                call()
            if not live:
                continue
            now = time.monotonic()
            # Pipes closed, the exit not seen: look again soon, unless its pidfd will say.
            unwatched = any(not c.fds and c.exit_fd is None for c in live)
            poll = _EXIT_POLL_S if unwatched else _POLL_S
            wait = max(0.0, min(poll, min(c.deadline for c in live) - now))
            for fd, events in poller.poll(wait * 1000):
                if fd in exits:  # it exited: the checks below reap it this round
                    _unwatch(exits.pop(fd), poller)
                    continue
                child, is_out = by_fd[fd]
                chunk = os.read(fd, _READ)
                while chunk and events & select.POLLHUP:  # no writer left: read to the end
                    child.feed(is_out, chunk)  # now, not a round later (a held pipe, it'd seem)
                    chunk = os.read(fd, _READ)
                if chunk:
                    child.feed(is_out, chunk)
                else:
                    poller.unregister(fd)
                    os.close(fd)
                    child.fds.remove(fd)
                    del by_fd[fd]
            now = time.monotonic()
            for child in list(live):
                done = timed_out = now >= child.deadline
                if not done and _has_exited(child.pid):
                    if not child.fds:
                        done = True
                    elif child.gone_at is None:
                        # It exited but something in its group still holds a pipe.
                        child.gone_at = now
                        _kill_group(child.pid)
                    elif now - child.gone_at > _GRACE_S:
                        done = True  # held open from outside its group (setsid)
                if done:
                    live.remove(child)
                    for fd in child.fds:
                        del by_fd[fd]
                    if child.exit_fd is not None:
                        del exits[child.exit_fd]
                    results[child.job.key] = _finish(child, poller, timed_out)
        if meanwhile is not None:
            meanwhile()  # no job ran at all
    finally:
        for child in live:  # interrupted: leave nothing running
            results[child.job.key] = _finish(child, poller, timed_out=True)
    return results


def run(
    argv: list[str],
    *,
    cwd: str | os.PathLike[str],
    env: Mapping[str, str],
    timeout_s: float,
    cap: int,
    stdin: Path | None = None,
    stderr_tail: int = 1024,
) -> Result:
    job = Job("", argv, timeout_s, cap, stdin=stdin, stderr_tail=stderr_tail)
    return run_many([job], cwd=cwd, env=env, concurrency=1)[""]
