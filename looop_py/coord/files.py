"""The `files` backend: claims/ and the kernel's flock, on this machine (the default).

Claims are coord/lease.py as ever; a fenced write takes the name's lock, checks
that the epoch is its live holder's, and writes under `state/shared/`; the pulse
is the work dir's flock (locks.py).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.coord import lease, reaper
from looop_py.coord.base import WORLD, check_key
from looop_py.errors import ClaimHeld
from looop_py.ids import check_segment
from looop_py.locks import PulseLock
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.coord.holders import Holder

SHARED = "shared"  # under state/: what fenced_put writes


class FilesCoordinator:
    backend = "files"

    def __init__(self, paths: Paths, host: str) -> None:
        self.paths = paths
        self.host = host

    def claim(
        self,
        name: str,
        holder: Holder,
        *,
        ttl_s: float | None = None,
        renew: bool = False,
        now: float,
        linger_s: float = 0.0,  # one machine: whoever reads the holder's work is here too
    ) -> lease.Outcome:
        return lease.claim(self.paths, name, holder, ttl_s=ttl_s, renew=renew, now=now)

    def unclaim(self, name: str, holder: Holder, *, now: float) -> lease.Claim | None:
        return lease.unclaim(self.paths, name, holder, now=now)

    def get(self, name: str, now: float) -> reaper.ClaimView | None:
        cur, unreadable = lease.read_claim(lease.claim_path(self.paths, name))
        if cur is None and not unreadable:
            return None
        return reaper.ClaimView(name, cur, cur.live(now) if cur else True)

    def list_claims(self, now: float) -> list[reaper.ClaimView]:
        return reaper.list_claims(self.paths, now)

    def reap(self, now: float, round_live: Callable[[str], bool]) -> list[dict[str, Any]]:
        return reaper.reap(self.paths, now, round_live)

    def fenced_put(self, name: str, epoch: int, key: str, value: bytes) -> bool:
        """Write `value` at `key` only while `epoch` is the live holder's token of `name`."""
        path = self._path(key)
        with lease.locked(self.paths, check_segment(name, "claim name")):
            cur, _ = lease.read_claim(lease.claim_path(self.paths, name))
            if cur is None or cur.epoch != epoch or not cur.live(time.time()):
                return False
            path.parent.mkdir(parents=True, exist_ok=True)
            jsonio.atomic_write(path, value)
            return True

    def read(self, key: str) -> bytes | None:
        try:
            return jsonio.read_bounded(self._path(key), jsonio.STATE_CAP)
        except FileNotFoundError:
            return None

    def read_world(self) -> bytes | None:
        return self.read(WORLD)

    def commit_world(self, name: str, epoch: int, record: dict[str, Any]) -> bool:
        """The committed world as one value, while `epoch` is `name`'s token."""
        return self.fenced_put(name, epoch, WORLD, jsonio.dumps(record, pretty=True) + b"\n")

    @contextlib.contextmanager
    def pulse(self) -> Iterator[int | None]:
        """The work dir's flock: one beat at a time on this machine (no token: the flock is it)."""
        self.paths.state.mkdir(exist_ok=True)
        lock = PulseLock(self.paths.pulse_lock)
        if not lock.acquire():
            raise ClaimHeld("another pulse is running", "it ends by itself; try again later")
        try:
            yield None
        finally:
            lock.release()

    def keep_pulse(self, between_beats: bool) -> None:
        """Nothing to keep: the flock is held while a beat runs, by the process beating."""

    def resign(self) -> dict[str, Any] | None:
        return None  # the flock went with the beat that held it

    def close(self) -> None:
        pass

    def _path(self, key: str) -> Path:
        return Path(os.path.join(self.paths.state, SHARED, *check_key(key).split("/")))
