"""What a child leaves behind outside its process group, ended when a span is over.

A child can escape its process group with `setsid` (a daemon, `(setsid cmd &)`).
`adopting()` makes looop a child subreaper (Linux prctl) for a span: what
escapes is reparented to looop instead of init, and at the end of the span
every process looop adopted is killed and reaped. A sensor is a reading, not a
daemon.
"""

from __future__ import annotations

import os
import time

from looop_py.procs import RUNNING, SIGKILL  # the signal without the `signal` module

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType

PR_SET_CHILD_SUBREAPER = 36
_SWEEP_S = 2.0  # the most time spent ending what was adopted


def _prctl() -> object:
    """libc's prctl (dlopen of the running process: no library is loaded; not cached, as
    functools would cost the quiet beat ~2 ms of imports to save two lookups)."""
    import _ctypes  # only while sensors run (see _set_subreaper)

    return _ctypes.dlsym(_ctypes.dlopen(None), "prctl")  # type: ignore[arg-type]


def _set_subreaper(on: bool) -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER): True if it took. Through _ctypes, the C half of
    ctypes (a third of the import cost), falling back to ctypes; False off Linux."""
    try:
        import _ctypes  # only while sensors run; a third of what `import ctypes` costs

        call = getattr(_ctypes, "call_function")  # noqa: B009 - private, not in the stubs
        return bool(call(_prctl(), (PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0)
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
        adopted = children() - keep - RUNNING
        if not adopted:
            break
        for pid in adopted:
            try:
                if os.getpgid(pid) == pid:
                    os.killpg(pid, SIGKILL)  # it leads a group of its own (setsid)
            except OSError:
                pass
            try:
                os.kill(pid, SIGKILL)
            except OSError:
                pass
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


class adopting:
    """Adopt what children leave behind during the block; end it all at the block's end.

    Yields a list that receives the count of processes ended (for tests and logs).
    A class, not @contextmanager: contextlib is not imported on the quiet path.
    """

    def __enter__(self) -> list[int]:
        self.keep = children() if _has_children() else set()
        self.adopting = _set_subreaper(True)
        self.ended: list[int] = []
        return self.ended

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.adopting:
            try:
                self.ended.append(end_adopted(self.keep))
            finally:
                _set_subreaper(False)
