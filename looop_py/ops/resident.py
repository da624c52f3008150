"""`looop up`: beats in one long-lived process, at once when a human-edited file changes.

Cron bounds reaction time to a minute. The resident pulse beats every
`interval_s` and, between beats, sleeps on what a human changes or a worker
ending — goals/, PLAYBOOK.md, looop.toml, sensors/, answers/, asks/, approvals,
a released claim, a worker's exit record — through inotify on Linux (ops/watch.py:
no CPU while idle, at any number of goals; a polling fallback elsewhere), so an
answer or an edited goal starts a beat within milliseconds. On a shared backend
(etcd) the asks, answers and approvals are records every host writes: an etcd
watch on their keys (coord/etcdwatch.py) ends the wait the moment another host
writes one, so an answer given there is acted on here within milliseconds, and
an idle `up` sends etcd nothing. The pulse lock stays
the single-instance guard for beats, so cron and `up` never beat at once; a
second `up` for the same work dir is refused by its own lock. `looop down`
sends SIGTERM and waits: the beat in progress ends cleanly. On etcd the pulse this
host holds stays its own between beats while `up` runs (coord/election.py), and is
handed over when `up` ends or `looop down` runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from looop_py.beat import quiet
from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.coord.choose import Reopening, coordinator
from looop_py.errors import Busy, LooopError, UsageError
from looop_py.locks import PulseLock
from looop_py.ops import watch
from looop_py.ops.goalwatch import GoalWatch
from looop_py.ops.watch import Watch
from looop_py.workdir import journal
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths

DOWN_WAIT_S = 30.0


def _up_lock(paths: Paths) -> PulseLock:
    return PulseLock(paths.state / "up.lock")


def _pid_file(paths: Paths) -> os.PathLike[str]:
    return paths.state / "up.pid"


SHARED_KINDS = ("asks", "answers", "approved")  # what humans write, on a shared backend


class SharedWatch:
    """The watch on the records other hosts write (etcd), following the WorkDir: opened
    again when looop.toml was edited (a new WorkDir), none on files."""

    def __init__(self, waiter: Watch) -> None:
        self.waiter = waiter
        self._for: WorkDir | None = None
        self._stop: Callable[[], None] | None = None

    def follow(self, wd: WorkDir) -> None:
        if wd is self._for:
            return
        self.close()
        self._for = wd
        with contextlib.suppress(LooopError):  # a bad config: the beat says so
            self._stop = wd.shelf.watch(SHARED_KINDS, self.waiter.notify)

    def close(self) -> None:
        stop, self._stop, self._for = self._stop, None, None
        if stop is not None:
            stop()


def run(
    opened: Reopening,
    *,
    interval_s: float,
    stop: threading.Event,
    on_beat: Callable[[BeatResult], None] = lambda r: None,
    watching: Watch | None = None,
    sealed: bool = True,
) -> int:
    """Beat every `interval_s`, and at once after a watched change, until `stop` is set.

    Returns how many beats ran. Meant to run in the main thread (a beat handles
    SIGTERM by ending itself cleanly). Whoever sets `stop` from elsewhere calls
    `watching.wake()` too, or the wait runs to its timeout. `sealed`: a beat the seal
    proves quiet is skipped as `looop pulse` skips it (`up_beat`); False: every beat is a
    full one, with its readings (`--json`, `-v`). Either way goals/ is taken as an inotify
    watch vouches for it (ops/goalwatch.py).
    """
    if interval_s <= 0:
        raise UsageError(f"the interval must be positive, got {interval_s:g}")
    own = watching is None
    waiter = watch.open_watch(opened.paths) if watching is None else watching
    shared = SharedWatch(waiter)
    goals = GoalWatch(str(opened.paths.goals))
    beats = 0
    try:
        while not stop.is_set():
            wd = opened.current()  # looop.toml again, if it was edited
            shared.follow(wd)
            # What changed so far, this beat reads; a change made while it runs (its own
            # writes included) wakes the next one, so no edit waits for the interval.
            waiter.drain()
            hold_pulse(wd)
            # Unsealed (`--json`, `-v`: every beat a full one, with its readings), the full
            # beat still takes goals/ as the watch vouches for it.
            on_beat(up_beat(wd, goals) if sealed else beat(wd, goals_from=goals))
            beats += 1
            deadline = time.monotonic() + interval_s
            while not stop.is_set() and (now := time.monotonic()) < deadline:
                if waiter.wait(deadline - now):
                    break  # a human changed something, a worker ended, another host wrote
    finally:
        shared.close()
        goals.close()
        if own:
            waiter.close()
    return beats


def up_beat(wd: WorkDir, goals: GoalWatch) -> BeatResult:
    """One beat of `up`: the seal's quiet path first, in this process, as `looop pulse`
    takes it (beat/quiet.py), with goals/ as the watch vouches for it (no goal stat'ed
    while none changed); else, or when it finds a change, the full beat: at once when the
    watch saw goals/ change, and it takes goals/ as the watch vouches for it too (no lstat
    per goal: workdir/watched.py). On a shared backend every beat is a full one (the pulse
    held between beats, coord/election.py)."""
    if wd.config.coordination.backend != "files" or goals.changed():
        # a goal edited: the quiet path would only find that out (the watch lists goals/
        # again for the beat, once)
        return beat(wd, goals_from=goals)
    started = time.monotonic()
    here = os.open(".", os.O_RDONLY | os.O_CLOEXEC)  # the quiet path moves to the work dir
    try:
        outcome = quiet.attempt(str(wd.paths.root), quiet=True, goals=goals.listed)
    except Exception:
        outcome = None  # the full beat meets (and reports) whatever broke it
    finally:
        os.fchdir(here)
        os.close(here)
    if isinstance(outcome, int):
        return BeatResult(BeatOutcome.SKIPPED, duration_s=time.monotonic() - started)
    return beat(wd, handover=outcome, goals_from=goals)


def hold_pulse(wd: WorkDir) -> None:
    """On etcd, the pulse this host takes stays its own between beats while `up` runs (the
    lease renewed from a thread); files: nothing to hold. etcd out of reach: the beat says so."""
    with contextlib.suppress(LooopError):
        coordinator(wd).keep_pulse(True)


def resign(wd: WorkDir) -> dict[str, object] | None:
    """Hand the shared pulse over now if this host holds it (`looop down`, `up` ending): who
    held it, or None."""
    return coordinator(wd).resign()


def serve(
    opened: Reopening,
    *,
    interval_s: float,
    on_beat: Callable[[BeatResult], None],
    sealed: bool = True,
) -> int:
    """`looop up` in the foreground: the up lock, the pid file, SIGTERM/SIGINT to stop."""
    paths = opened.paths
    paths.state.mkdir(exist_ok=True)
    lock = _up_lock(paths)
    if not lock.acquire():
        raise Busy("`looop up` is already running for this work dir", "stop it: looop down")
    stop = threading.Event()
    waiter = watch.open_watch(paths)

    def finish(signum: int, frame: object) -> None:
        stop.set()
        waiter.wake()

    previous = {s: signal.signal(s, finish) for s in (signal.SIGTERM, signal.SIGINT)}
    pid_file = _pid_file(paths)
    try:
        with open(pid_file, "w", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
        journal.emit(opened.current(), "up", time.time(), pid=os.getpid(), interval_s=interval_s)
        try:
            beats = run(
                opened,
                interval_s=interval_s,
                stop=stop,
                on_beat=on_beat,
                watching=waiter,
                sealed=sealed,
            )
        except KeyboardInterrupt:  # SIGTERM during a beat: the beat ended itself cleanly
            beats = -1
        with contextlib.suppress(LooopError):  # hand the pulse over now, not after the TTL
            resign(opened.current())
        journal.emit(opened.current(), "down", time.time(), pid=os.getpid())
        return beats
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(pid_file)
        waiter.close()
        lock.release()


def running(paths: Paths) -> int | None:
    """The pid of this work dir's `looop up`, or None."""
    if not _up_lock(paths).held_elsewhere():
        return None
    try:
        with open(_pid_file(paths), encoding="utf-8") as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def stop_resident(paths: Paths, *, wait_s: float = DOWN_WAIT_S) -> int | None:
    """`looop down`: SIGTERM the resident pulse and wait until it is gone; its pid, or None."""
    pid = running(paths)
    if pid is None:
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while _up_lock(paths).held_elsewhere():
        if time.monotonic() > deadline:
            raise Busy(f"`looop up` (pid {pid}) did not stop within {wait_s:g} s", f"kill {pid}")
        time.sleep(0.05)
    return pid


def unit_text(paths: Paths, interval_s: float) -> str:
    """A systemd user unit that keeps `looop up` running for this work dir."""
    exe = os.path.join(os.path.dirname(sys.executable), "looop")
    if not os.path.exists(exe):
        exe = f"{sys.executable} -m looop_py"
    return (
        "[Unit]\n"
        f"Description=looop resident pulse for {paths.root}\n\n"
        "[Service]\n"
        f"ExecStart={exe} -C {paths.root} up --interval {interval_s:g}\n"
        f"ExecStop={exe} -C {paths.root} down\n"
        "Restart=on-failure\n\n"
        "[Install]\n"
        "WantedBy=default.target\n"
        f"# save as ~/.config/systemd/user/looop-{paths.root.name}.service, then:\n"
        f"#   systemctl --user enable --now looop-{paths.root.name}\n"
    )
