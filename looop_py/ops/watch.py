"""What `looop up` waits on between beats: an edit a human makes, or a worker ending.

On Linux the resident pulse sleeps in select() on an inotify descriptor (ops/inotify.py)
with watches on a few directories — the work dir itself (PLAYBOOK.md, looop.toml, a
watched folder recreated), goals/, sensors/, asks/, answers/, state/approved/ (any
change), claims/ (a claim released), sessions/ (a new worker's folder) and each running
worker's folder (its status.json saying it ended) — so idle it uses no CPU at any number
of goals, and an edit wakes it at once. A watched folder deleted or moved away is watched
again when it reappears; an overflowing event queue (the kernel drops events past
fs.inotify.max_queued_events) counts as a change and rebuilds every watch from a rescan.
Dot-names are temporary files (jsonio's atomic writes, editors' swap files) and ignored.
Elsewhere, or when the kernel refuses an inotify instance, `Polling` compares the stat
signature of the same files every POLL_S. Both are woken early through a pipe: by
`wake()` (a signal handler's `looop down`: the wait ends, no change) and by `notify()`
(a change seen elsewhere, such as a record another host wrote on etcd: the wait ends
with a change).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
import time
from enum import Enum
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import CorruptFile
from looop_py.ops import inotify
from looop_py.workdir.paths import Paths

POLL_S = 0.2  # the fallback's stat period
STATUS = "status.json"  # a worker's exit record (workers/records.py)


class Role(Enum):
    ROOT = "root"  # PLAYBOOK.md, looop.toml, and the watched folders by name
    ANY = "any"  # any change of a non-dot entry
    RELEASE = "release"  # an entry removed: a claim released
    SESSIONS = "sessions"  # a new worker folder: watch it
    SESSION = "session"  # status.json rewritten with an end state


class Watch:
    """Block until something worth a beat changed, at most `timeout` seconds."""

    kind = "base"

    def __init__(self) -> None:
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.rescans = 0

    def wait(self, timeout: float) -> bool:
        """True when a change was seen; False at the timeout or after `wake()`."""
        raise NotImplementedError

    def drain(self) -> None:
        """Forget the changes seen so far: the beat about to start reads them."""
        raise NotImplementedError

    def wake(self) -> None:
        """End a `wait` early, as if nothing changed (safe in a signal handler)."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"!")

    def notify(self) -> None:
        """End a `wait` with a change (from any thread): something worth a beat happened
        outside what this watch sees."""
        with contextlib.suppress(BlockingIOError):
            os.write(self._wake_w, b"+")

    def _woken(self) -> bool:
        """Empty the pipe; whether `notify` wrote to it."""
        notified = False
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._wake_r, 512):
                notified = notified or b"+" in chunk
        return notified

    def close(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def open_watch(paths: Paths) -> Watch:
    """inotify on Linux; the stat poll elsewhere or when the kernel refuses."""
    if sys.platform.startswith("linux"):
        try:
            return Events(paths)
        except OSError:
            pass  # out of inotify instances (fs.inotify.max_user_instances): poll instead
    return Polling(paths)


class Events(Watch):
    kind = "inotify"

    def __init__(self, paths: Paths) -> None:
        super().__init__()
        self.paths = paths
        try:
            self._ino = inotify.Inotify()
        except OSError:
            super().close()
            raise
        self._by_wd: dict[int, tuple[Role, Path]] = {}
        self._watched: dict[Path, int] = {}
        self._fixed = {
            paths.root: Role.ROOT,
            paths.goals: Role.ANY,
            paths.sensors: Role.ANY,
            paths.asks: Role.ANY,
            paths.answers: Role.ANY,
            paths.approved: Role.ANY,
            paths.claims: Role.RELEASE,
            paths.sessions: Role.SESSIONS,
        }
        self._root_names = {paths.playbook.name, paths.config.name}
        self._rescan()

    @property
    def watched(self) -> frozenset[Path]:
        return frozenset(self._watched)

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self._ino.fd, self._wake_r], [], [], left)
            if self._wake_r in ready:
                return self._woken()
            if ready and self._handle(self._ino.read()):
                return True

    def drain(self) -> None:
        self._handle(self._ino.read())
        self._ensure()  # a folder the beat created (state/approved/, sessions/) is watched now

    def close(self) -> None:
        self._ino.close()
        super().close()

    # -- watches --------------------------------------------------------------
    def _add(self, role: Role, path: Path) -> bool:
        """Watch a folder; False when it is not there (or the kernel's limit is reached)."""
        try:
            wd = self._ino.add(str(path))
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENOSPC, errno.EACCES):
                return False  # ENOSPC: fs.inotify.max_user_watches; the interval still beats
            raise
        self._by_wd[wd] = (role, path)
        self._watched[path] = wd
        return True

    def _forget(self, wd: int) -> None:
        role_path = self._by_wd.pop(wd, None)
        if role_path is not None:
            self._watched.pop(role_path[1], None)
            self._ino.remove(wd)

    def _ensure(self) -> bool:
        """Watch every fixed folder not watched yet; True when one was added (it may hold
        changes nobody saw)."""
        added = False
        for path, role in self._fixed.items():
            if path not in self._watched and self._add(role, path):
                added = True
                if role is Role.SESSIONS:
                    self._watch_sessions()
        return added

    def _watch_sessions(self) -> None:
        """Watch each worker folder still running."""
        try:
            with os.scandir(self.paths.sessions) as it:
                folders = [Path(e.path) for e in it if e.is_dir() and not e.name.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return
        for folder in folders:
            self._watch_session(folder)

    def _watch_session(self, folder: Path, *, new: bool = False) -> bool:
        """Watch a worker's folder unless it has ended; True when a `new` one has ended
        already (a short worker may end before its folder's event is read)."""
        if folder in self._watched:
            return False
        if _ended(folder):
            return new
        if self._add(Role.SESSION, folder) and _ended(folder):  # it ended as we added the watch
            self._forget(self._watched[folder])
            return True
        return False

    def _rescan(self) -> None:
        """Drop every watch and watch again from the directories as they are now."""
        for wd in list(self._by_wd):
            self._forget(wd)
        self._ino.read()  # the IN_IGNORED events the removals queued
        self._ensure()

    # -- events ---------------------------------------------------------------
    def _handle(self, events: list[inotify.Event]) -> bool:
        hit = False
        for event in events:
            if event.overflow:
                self.rescans += 1
                self._rescan()
                hit = True
                continue
            found = self._by_wd.get(event.wd)
            if found is None:
                continue  # a watch removed already (IN_IGNORED after our own removal)
            role, path = found
            if not event.name:
                if event.mask & inotify.GONE:  # the folder itself was deleted or moved away
                    self._forget(event.wd)
                    hit |= role is not Role.SESSION
                continue
            hit |= self._matters(role, path, event)
        return hit

    def _matters(self, role: Role, path: Path, event: inotify.Event) -> bool:
        name, mask = event.name, event.mask
        if name.startswith("."):
            return False
        if role is Role.ANY:
            return True
        if role is Role.ROOT:
            if name in self._root_names:
                return True
            if mask & (inotify.IN_CREATE | inotify.IN_MOVED_TO) and mask & inotify.IN_ISDIR:
                return self._ensure()  # a watched folder (re)appeared
            return False
        if role is Role.RELEASE:
            return bool(mask & (inotify.IN_DELETE | inotify.IN_MOVED_FROM))
        if role is Role.SESSIONS:
            if mask & (inotify.IN_CREATE | inotify.IN_MOVED_TO) and mask & inotify.IN_ISDIR:
                return self._watch_session(path / name, new=True)
            return False
        # Role.SESSION: a worker's exit record
        written = mask & (inotify.IN_MOVED_TO | inotify.IN_CLOSE_WRITE)
        if name == STATUS and written and _ended(path):
            self._forget(self._watched[path])
            return True
        return False


def _ended(folder: Path) -> bool:
    try:
        status = jsonio.read_json(folder / STATUS)
    except (FileNotFoundError, NotADirectoryError, CorruptFile):
        return False  # starting, or half written: the next write says
    return isinstance(status, dict) and status.get("state") not in (None, "running")


class Polling(Watch):
    """The stat signature of what a human edits, compared every POLL_S."""

    kind = "poll"

    def __init__(self, paths: Paths) -> None:
        super().__init__()
        self.paths = paths
        self._seen = signature(paths)

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._wake_r], [], [], min(POLL_S, left))
            if ready:
                return self._woken()
            now = signature(self.paths)
            if now != self._seen:
                self._seen = now
                return True
        return False

    def drain(self) -> None:
        self._seen = signature(self.paths)


def signature(paths: Paths) -> tuple[tuple[str, int, int], ...]:
    """(name, mtime_ns, size) of every file a human edits to steer the loop, sorted."""
    found: list[tuple[str, int, int]] = []
    for directory in (paths.goals, paths.sensors, paths.answers, paths.asks, paths.approved):
        try:
            with os.scandir(directory) as it:
                for e in it:
                    if not e.name.startswith("."):
                        st = e.stat(follow_symlinks=False)
                        found.append((e.path, st.st_mtime_ns, st.st_size))
        except FileNotFoundError:
            continue
    for path in (paths.playbook, paths.config):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        found.append((str(path), st.st_mtime_ns, st.st_size))
    found.sort()
    return tuple(found)
