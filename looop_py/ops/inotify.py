"""Linux inotify through ctypes: a non-blocking descriptor, directory watches, parsed events.

The kernel API is three calls (inotify_init1, inotify_add_watch, inotify_rm_watch)
plus read(2) on the descriptor, so it is called directly rather than through a
package: nothing to install, and the resident pulse (ops/watch.py) waits on the
descriptor with select() beside its own wake pipe. Watches are per directory: the
kernel reports an event for every entry of a watched directory, with its name.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from dataclasses import dataclass

# <sys/inotify.h>
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

CHANGES = IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED  # the watched directory itself went away
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len


@dataclass(frozen=True, slots=True)
class Event:
    wd: int  # -1 for IN_Q_OVERFLOW
    mask: int
    name: str  # the entry's name in the watched directory; "" for the directory itself

    @property
    def overflow(self) -> bool:
        return bool(self.mask & IN_Q_OVERFLOW)


def parse(buf: bytes) -> list[Event]:
    """The events in one read(2) of an inotify descriptor."""
    events, at = [], 0
    while at + _HEADER.size <= len(buf):
        wd, mask, _cookie, size = _HEADER.unpack_from(buf, at)
        at += _HEADER.size
        raw = buf[at : at + size].split(b"\0", 1)[0]
        at += size
        events.append(Event(wd, mask, os.fsdecode(raw)))
    return events


class Inotify:
    """One inotify instance. Raises OSError when the kernel refuses (too many instances)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        fd = self._libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise _oserror("inotify_init1")
        self.fd: int = fd

    def add(self, path: str, mask: int = CHANGES | GONE) -> int:
        """Watch a directory (never a file: IN_ONLYDIR); its watch descriptor."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), mask | IN_ONLYDIR)
        if wd < 0:
            raise _oserror(f"inotify_add_watch {path}")
        return int(wd)

    def remove(self, wd: int) -> None:
        self._libc.inotify_rm_watch(self.fd, wd)  # EINVAL: already gone with its directory

    def read(self) -> list[Event]:
        """Every event queued now; [] when none is."""
        events: list[Event] = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return events
            events.extend(parse(buf))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _oserror(what: str) -> OSError:
    code = ctypes.get_errno() or errno.EIO
    return OSError(code, f"{what}: {os.strerror(code)}")
