"""The pulse lock: one beat at a time per work dir.

flock(2) is released by the kernel whenever the holder dies, so a killed pulse
never leaves a stale lock behind and no pid has to be guessed at.
"""

from __future__ import annotations

import fcntl
import os
import time

# typing is not imported at run time: the quiet beat takes this lock.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType


class PulseLock:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, timeout_s: float = 0.0) -> bool:
        """Take the lock; False when another process holds it past `timeout_s`."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not flock_within(fd, timeout_s):
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def held_elsewhere(self) -> bool:
        """Probe without keeping the lock: is a pulse running right now?"""
        if self.acquire():
            self.release()
            return False
        return True

    def __enter__(self) -> PulseLock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def flock_within(
    fd: int, timeout_s: float, pause_s: float = 0.05, max_pause_s: float = 0.0
) -> bool:
    """Take an exclusive flock on `fd`, trying again every `pause_s` (doubling up to
    `max_pause_s`, when that is larger) until `timeout_s` has passed; whether it was taken."""
    deadline = time.monotonic() + timeout_s
    pause = pause_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
        time.sleep(pause)
        pause = max(pause_s, min(pause * 2, max_pause_s))
