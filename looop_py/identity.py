"""Process identity: a process is its pid and its create time, so a recycled pid is not life.

Alive means the pid exists, is not a zombie, and was created when the record
says. A liveness check that fails for any other reason (permissions …) counts
as alive, so nothing is reaped blind.

This is the only module that imports psutil, and only when a process has to
be looked at beyond /proc: the quiet beat checks liveness every beat, and
importing psutil would cost more than the check.
"""

from __future__ import annotations

import os
import sys

# typing is not imported at run time: a worker's supervisor loads this at every start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")


def _once(function: Callable[[], T]) -> Callable[[], T]:
    """functools.cache through its C half: functools itself imports collections (~2 ms of
    a quiet beat with a live claim), for two facts of this boot of this machine."""
    try:
        from _functools import _lru_cache_wrapper  # type: ignore[import-not-found]
    except ImportError:  # an interpreter without it
        from functools import cache

        return cache(function)
    cached: Callable[[], T] = _lru_cache_wrapper(function, None, False, tuple)
    return cached


CREATE_TIME_SLACK_S = 1.0  # psutil derives create times from the boot time, in whole seconds


def _identity(pid: int) -> tuple[bool, float] | None:
    """(is a zombie, create time) of process `pid`; None if there is no such process.

    Raises on anything else (permissions …), so callers can fail closed. On
    Linux this reads /proc/<pid>/stat directly, the way psutil computes it
    (start ticks / CLK_TCK + boot time).
    """
    if _PROC:
        try:  # os-level: no buffered file object for one short read (a third of the cost)
            fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, ProcessLookupError):
            return None
        try:
            data = os.read(fd, 4096)  # a stat line is a few hundred bytes
        except ProcessLookupError:
            return None
        finally:
            os.close(fd)
        fields = data[data.rindex(b")") + 2 :].split()  # after "pid (comm) "
        return fields[0] in (b"Z", b"X"), int(fields[19]) / _clock_ticks() + _boot_time()
    import psutil  # only off Linux, or to walk a process tree: the quiet beat reads /proc

    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return proc.status() == psutil.STATUS_ZOMBIE, proc.create_time()
    except psutil.ZombieProcess:
        return True, 0.0
    except psutil.NoSuchProcess:
        return None


_PROC = sys.platform.startswith("linux") and os.path.exists("/proc/self/stat")


@_once  # a fact of this boot of this machine
def _clock_ticks() -> float:
    return float(os.sysconf("SC_CLK_TCK"))


@_once  # a fact of this boot of this machine
def _boot_time() -> float:
    with open("/proc/stat", "rb") as f:
        line = next(x for x in f if x.startswith(b"btime"))
    return float(line.split()[1])


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


def descendants(pid: int) -> list[tuple[int, float]]:
    """(pid, create time) of every descendant, taken before signalling the tree."""
    import psutil  # only off Linux, or to walk a process tree: the quiet beat reads /proc

    try:
        return [(c.pid, c.create_time()) for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def group_members(pgid: int) -> list[tuple[int, float]]:
    """(pid, create time) of the live processes in process group `pgid` (zombies excluded).

    A zombie is not reaped everywhere (a container's init may never do it), so
    "the group still exists" cannot be asked of the kernel; it is counted here.
    """
    import psutil  # only off Linux, or to walk a process tree: the quiet beat reads /proc

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


def lasting_ancestor(pid: int) -> int:
    """`pid`, or the nearest ancestor it is a forked copy of.

    A shell runs `$( … )` (when it cannot exec the command directly, e.g. with a
    redirection), pipelines and `( … )` in forked copies of itself that end as
    soon as they are done. A fork keeps its parent's executable and command line,
    so walk up while both match: the process found is the script itself. On
    Linux this reads /proc (`looop claim` runs this, and psutil costs ~10 ms to
    import); elsewhere it asks psutil.
    """
    if _PROC:
        return _lasting_ancestor_proc(pid)
    import psutil  # only off Linux, or to walk a process tree: the quiet beat reads /proc

    found = pid
    try:
        proc = psutil.Process(pid)
        for _ in range(64):
            parent = proc.parent()
            if parent is None or parent.pid <= 1:
                break
            if parent.exe() != proc.exe() or parent.cmdline() != proc.cmdline():
                break
            proc = parent
            found = proc.pid
    except (psutil.Error, OSError):
        pass  # what could be looked at is the answer
    return found


def _lasting_ancestor_proc(pid: int) -> int:
    def looks(p: int) -> tuple[str, bytes, int]:
        with open(f"/proc/{p}/stat", "rb") as f:
            stat = f.read()
        with open(f"/proc/{p}/cmdline", "rb") as f:
            cmdline = f.read()
        ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        return os.readlink(f"/proc/{p}/exe"), cmdline, ppid

    found = pid
    try:
        exe, cmdline, ppid = looks(pid)
        for _ in range(64):
            if ppid <= 1:
                break
            p_exe, p_cmdline, p_ppid = looks(ppid)
            if (p_exe, p_cmdline) != (exe, cmdline):
                break
            found, ppid = ppid, p_ppid
    except (OSError, ValueError):
        pass  # what could be looked at is the answer
    return found


MACHINE_ENV = "LOOOP_MACHINE_ID"  # overrides the machine's identity (containers sharing one)


def machine() -> str:
    """This machine and this boot of it: $LOOOP_MACHINE_ID, else /etc/machine-id and the
    kernel's boot id. Two hosts that claim one host id are told apart by it (coord/remote.py);
    containers that share a kernel and an image share both, so give each its own
    LOOOP_MACHINE_ID (or, simpler, its own host id)."""
    found = os.environ.get(MACHINE_ENV, "").strip()
    if found:
        return found[:128]
    parts = []
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id", "/proc/sys/kernel/random/boot_id"):
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                parts.append(f.readline(64).strip())
        except OSError:
            parts.append("")
    machine_id = parts[0] or parts[1]
    return f"{machine_id or '?'}:{parts[2] or '?'}"
