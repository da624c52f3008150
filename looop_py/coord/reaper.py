"""The claim set as the beat sees it: every claim with its liveness, and the reaper.

A claim is reaped when its holder process is gone (or its pid was recycled),
when its ttl passed without a renewal, or, for a loop round's claim, when the
round has ended; the caller says how to ask that (`round_live`), so claims
never read rounds/. An unreadable claim file is debris: removed once it is
older than DEBRIS_GRACE_S.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looop_py.coord.holders import ROUND_PREFIX
from looop_py.coord.lease import Claim, locked, read_claim, set_aside
from looop_py.ids import is_safe_segment
from looop_py.workdir.paths import Paths

DEBRIS_GRACE_S = 10.0  # an unreadable claim file older than this is removed by the reaper


@dataclass(frozen=True, slots=True)
class ClaimView:
    name: str
    claim: Claim | None  # None: unreadable
    live: bool

    def to_json(self) -> dict[str, Any]:
        body = self.claim.to_json() if self.claim else {"name": self.name, "unreadable": True}
        return {**body, "live": self.live}


def _claim_files(paths: Paths) -> list[tuple[str, Path]]:
    try:
        entries = sorted(os.scandir(paths.claims), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        stem = entry.name.removesuffix(".json")
        if stem != entry.name and is_safe_segment(stem) and entry.is_file():
            found.append((stem, Path(entry.path)))
    return found


def list_claims(paths: Paths, now: float) -> list[ClaimView]:
    """Every claim file, sorted by name; unreadable ones count as live (fail closed)."""
    views = []
    for name, path in _claim_files(paths):
        cur, _ = read_claim(path)
        views.append(ClaimView(name, cur, cur.live(now) if cur else True))
    return views


def reap(paths: Paths, now: float, round_live: Callable[[str], bool]) -> list[dict[str, Any]]:
    """Remove claims whose holder is dead or whose ttl passed; one event dict per claim.

    A round's claim has no process to look at: it goes when `round_live(round id)`
    says the round has ended (the caller asks the loops side; claims never read rounds/).
    """
    events: list[dict[str, Any]] = []
    for name, path in _claim_files(paths):
        reason = _reap_reason(path, now, round_live)
        if reason is None:
            continue  # live: no lock needed to leave it alone
        with locked(paths, name) as fd:
            cur, _ = read_claim(path)
            if _reap_reason(path, now, round_live) is None:
                continue  # taken over while we waited for the lock
            set_aside(paths, name, fd)
        event: dict[str, Any] = {"event": "claim_reaped", "name": name, "reason": reason}
        if cur is not None:
            event.update(session=cur.session, pid=cur.pid, epoch=cur.epoch)
        events.append(event)
    return events


def _reap_reason(path: Path, now: float, round_live: Callable[[str], bool]) -> str | None:
    cur, unreadable = read_claim(path)
    if cur is not None and cur.pid is None and (cur.session or "").startswith(ROUND_PREFIX):
        if cur.expired(now):
            return "expired"
        round_id = (cur.session or "").removeprefix(ROUND_PREFIX)
        return None if round_live(round_id) else "round-ended"
    if cur is None or cur.pid is None:
        if not unreadable and cur is None:
            return None  # gone already
        try:
            old = now - path.stat().st_mtime > DEBRIS_GRACE_S
        except FileNotFoundError:
            return None
        return "unreadable" if old else None
    if cur.expired(now):
        return "expired"
    if not cur.holder_alive():
        return "holder-dead"
    return None
