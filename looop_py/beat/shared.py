"""The beat on a shared coordination backend (etcd): the pulse claim and the fenced commit.

Each beat, under the work dir's own flock as ever, takes the `pulse` claim
without waiting (another host has it: LOCKED, naming that host), reaps the
shared claims, and runs as on files, except that the committed world is read
from the backend (so any pulse host continues where another left off) and
written back only while this beat's pulse token is still current: a paused or
partitioned ex-leader commits nothing. So is every shared record the beat
writes (rounds, asks, answers, approvals, timers, the loop schedule:
workdir/shelf.py); the first write refused for a lost token (FenceLost) ends
the beat. When the backend cannot be reached or has no quorum, the beat is
skipped with that reason in the journal; it never falls back to files.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.coord.base import PULSE, host_id
from looop_py.coord.choose import coordinator
from looop_py.errors import ClaimHeld, FenceLost, LooopError, Unavailable
from looop_py.loops import store
from looop_py.sensing.sense import (
    Committed,
    World,
    committed_record,
    load_committed,
    parse_committed,
)
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from looop_py.world import hashes

if TYPE_CHECKING:
    from looop_py.coord.base import Coordinator
    from looop_py.coord.etcdseal import Fingerprint
    from looop_py.workdir.context import WorkDir

DOWN = "coordination-down.json"  # under state/: since when the backend has been out of reach
# Readings only the host that takes them can make: its own worker sessions.
HOST_LOCAL = frozenset({"snap:sys-sessions"})


def scoped(world: World, last: Committed, host: str) -> World:
    """The world as every host can agree on it: this host's local readings become items
    `NAME@host`, and each other host's are carried from the committed world as that host
    last saw them, so the pulse passing between hosts changes nothing by itself. Items
    are sorted, so the same items hash the same on every host."""
    items = {f"{k}@{host}" if k in HOST_LOCAL else k: v for k, v in world.items.items()}
    for key, value in last.items.items():
        name, at, other = key.partition("@")
        if at and name in HOST_LOCAL and other != host:
            items[key] = value
    ordered = dict(sorted(items.items()))
    whole, policy = hashes(ordered)
    return replace(world, items=ordered, hash=whole, policy=policy)


def as_committed(wd: WorkDir, world: World) -> tuple[World, Committed]:
    """`looop sense` on a shared backend: its world scoped as a beat's, and the shared
    committed world it would be compared with (read, not mirrored: sense writes nothing
    under state/). Cut off from the backend, this host's mirror of it stands in."""
    coord = coordinator(wd)
    try:
        last = _committed(coord.read_world())
    except Unavailable:
        last = load_committed(wd.paths)
    return scoped(world, last, coord.host), last


class Fence:
    """This beat's pulse token, and the committed world read and written under it."""

    LOST = "lost the pulse claim before committing (a newer pulse holds it); nothing committed"

    def __init__(self, coord: Coordinator, paths: Paths, token: int) -> None:
        self.coord = coord
        self.paths = paths
        self.token = token

    def held(self) -> bool:
        view = self.coord.get(PULSE, time.time())
        return bool(view and view.live and view.claim and view.claim.epoch == self.token)

    def load_committed(self) -> Committed:
        """The shared committed world, mirrored into state/ for `looop status` and the page."""
        data = self.coord.read_world()
        if data is None:
            return Committed()  # nothing committed on this prefix yet: every item is new
        jsonio.atomic_write(self.paths.last_world, data, durable=False)
        return _committed(data)

    def scope(self, world: World, last: Committed) -> World:
        """This beat's world as every host can agree on it (`scoped`)."""
        return scoped(world, last, self.coord.host)

    def commit(self, world: World, now: float, action: str | None, next_wake: float | None) -> bool:
        """Write the world (as sensing/sense.py's commit does, with host and token) if held."""
        record = committed_record(world, now, action, next_wake)
        record.update(host=self.coord.host, epoch=self.token)
        if not self.coord.commit_world(PULSE, self.token, record):  # only what changed
            return False
        jsonio.atomic_write(self.paths.last_world, jsonio.dumps(record, pretty=True) + b"\n")
        return True

    def mark(self) -> Fingerprint | None:
        """The shared keys' fingerprint as the beat starts, before it reads any (the seal's
        baseline: coord/etcdseal.py); None when it cannot be taken (no seal then)."""
        from looop_py.coord import etcdseal  # the seal on etcd: its client is loaded already
        from looop_py.coord.remote import EtcdCoordinator

        if not isinstance(self.coord, EtcdCoordinator):
            return None
        with contextlib.suppress(Unavailable):  # the beat meets it again, and says so
            return etcdseal.mark(self.coord.client, self.coord.cfg, self.coord.prefix)
        return None

    def settled(self, mark: Fingerprint | None) -> str | None:
        """The seal's `shared` line: `mark`, if nothing in the cluster was written since."""
        from looop_py.coord import etcdseal  # loaded by mark already
        from looop_py.coord.remote import EtcdCoordinator

        if mark is None or not isinstance(self.coord, EtcdCoordinator):
            return None
        with contextlib.suppress(Unavailable):
            still = etcdseal.settled(self.coord.client, mark)
            return still.line() if still is not None else None
        return None


@dataclass(frozen=True, slots=True)
class Standing:
    """Where this host stands on a shared backend, as `looop status` shows it."""

    backend: str
    host: str
    pulse_host: str | None = None  # who holds the pulse now (None: free)
    pulse_epoch: int | None = None
    pulse_since: float | None = None  # when its holder took it (it keeps it across beats)
    committed: Committed | None = None  # the shared committed world
    claims: int = 0  # live claims on the backend, every host's (the pulse left out)
    error: str | None = None  # the backend could not be read

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "host": self.host,
            "pulse": {
                "host": self.pulse_host,
                "epoch": self.pulse_epoch,
                "since": journal.iso(self.pulse_since) if self.pulse_since else None,
            }
            if self.pulse_host is not None
            else None,
            "claims": self.claims,
            "error": self.error,
        }


def standing(wd: WorkDir) -> Standing | None:
    """This host, the pulse, the committed world and the claims on a shared backend; None on
    files. A backend out of reach is said so, not raised: status still shows the rest."""
    cfg = wd.config
    c = cfg.coordination
    if c.backend == "files":
        return None
    host = host_id(c.host_id, wd.paths.state)
    try:
        coord = coordinator(wd)
        now = time.time()
        pulse = coord.get(PULSE, now)
        data = coord.read_world()
        claims = sum(1 for v in coord.list_claims(now) if v.live and v.name != PULSE)
    except LooopError as exc:
        return Standing(c.backend, host, error=exc.message)
    held = pulse.claim if pulse is not None and pulse.live else None
    return Standing(
        c.backend,
        host,
        held.host if held else None,
        held.epoch if held else None,
        held.acquired_at if held else None,
        _committed(data),
        claims,
    )


def _committed(data: bytes | None) -> Committed:
    """The shared committed world's bytes, read as load_committed reads the local copy: a
    value that does not fit (not JSON, too deep, the wrong shape) is nothing committed."""
    try:
        return parse_committed(jsonio.loads_bounded(data)) if data else Committed()
    except ValueError:
        return Committed()


def beat_shared(
    wd: WorkDir,
    body: Callable[[Fence], BeatResult],
    *,
    started: float,
) -> BeatResult:
    """Run `body` holding the shared pulse; LOCKED or skipped (with the reason) otherwise."""
    now = wd.clock()
    with contextlib.ExitStack() as stack:
        try:
            coord = coordinator(wd)
            token = stack.enter_context(coord.pulse())
        except ClaimHeld as exc:  # another host holds the pulse: one read, nothing written
            held_by = getattr(exc, "holder", None)  # coord/election.py PulseHeld
            reason = exc.message if held_by else f"another pulse is running: {exc.message}"
            journal.emit(wd, "beat", wd.clock(), outcome=BeatOutcome.LOCKED.value, reason=reason)
            return BeatResult(BeatOutcome.LOCKED, reason=reason, held_by=held_by)
        except Unavailable as exc:
            return _skipped(wd, exc, now, started)
        assert token is not None  # a shared backend's pulse has a token
        with contextlib.suppress(FileNotFoundError):
            (wd.paths.state / DOWN).unlink()  # reached again: no longer cut off
        try:
            for event in coord.reap(now, partial(store.is_live, wd.shelf)):
                journal.emit(wd, str(event.pop("event")), now, **event)
            with wd.shelf.fenced(PULSE, token):  # every shared record it writes
                return body(Fence(coord, wd.paths, token))
        except Unavailable as exc:  # lost mid-beat: whatever was not committed was not
            return _skipped(wd, exc, now, started)


def _skipped(wd: WorkDir, exc: Unavailable, now: float, started: float) -> BeatResult:
    if isinstance(exc, FenceLost):  # not "unavailable": etcd answered that another host leads
        reason = f"{exc.message}; nothing after that was acted on or committed"
        cut_off = f"beat cut short: {exc.message}"
    else:
        reason = f"coordination unavailable, beat skipped: {exc.message}"
        since = _down_since(wd.paths, now)
        cut_off = f"beat skipped: {exc.message} (since {journal.iso(since)})"
    journal.write(wd, f"⚠ {reason}", now)
    journal.emit(
        wd,
        "beat",
        wd.clock(),
        outcome=BeatOutcome.SKIPPED.value,
        reason=reason,
        duration_s=round(time.monotonic() - started, 3),
    )
    return BeatResult(BeatOutcome.SKIPPED, reason=reason, cut_off=cut_off)


def _down_since(paths: Paths, now: float) -> float:
    """When this host first found the backend out of reach, kept in state/ until a beat
    reaches it again (`looop pulse` and `looop status` say since when)."""
    path = paths.state / DOWN
    try:
        found = jsonio.read_json(path, {})
    except LooopError:
        found = {}
    since = jsonio.number(found.get("since")) if isinstance(found, dict) else None
    if since is None:
        since = now
        with contextlib.suppress(OSError):
            jsonio.write_json(path, {"v": 1, "since": now}, durable=False)
    return since


def down_since(paths: Paths) -> float | None:
    """Since when this host has been cut off from the backend (None: its last beat got in)."""
    try:
        found = jsonio.read_json(paths.state / DOWN, {})
    except LooopError:
        return None
    return jsonio.number(found.get("since")) if isinstance(found, dict) else None
