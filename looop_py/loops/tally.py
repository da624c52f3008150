"""Each loop's archived rounds summed up, so `looop loops` never reads the archive.

rounds/done/ changes only by whole files moved in (a beat archives a round an hour
after it ended) or deleted ([retention]), and each such change moves the folder's
mtime. state/rounds-tally.json keeps, with the folder's stat, each loop's archived
round count, tokens and newest outcome; while the stat holds, `looop loops` reads
that one file instead of every archived round (a cache: one that does not fit is
summed afresh). A shared shelf has no folder to stat: it sums the rows each time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.loops import store
from looop_py.loops.store import RoundRow

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir

NAME = "rounds-tally.json"  # in state/


@dataclass(frozen=True, slots=True)
class Tally:
    rounds: int = 0
    tokens: int = 0
    last: tuple[float, str, str] | None = None  # (started_at, id, outcome) of the newest

    def to_json(self) -> list[Any]:
        return [self.rounds, self.tokens, list(self.last) if self.last else None]


def summed(rows: Iterable[RoundRow]) -> dict[str, Tally]:
    """Each loop's rounds counted, their tokens added, the newest with an outcome. Pure."""
    out: dict[str, Tally] = {}
    for r in rows:
        if r.loop is None:
            continue
        t = out.get(r.loop, Tally())
        last = t.last
        if r.outcome and (last is None or (r.started_at or 0.0, r.id) > last[:2]):
            last = (r.started_at or 0.0, r.id, r.outcome)
        out[r.loop] = Tally(t.rounds + 1, t.tokens + r.tokens, last)
    return out


def archived(wd: WorkDir) -> dict[str, Tally]:
    """Each loop's tally of rounds/done/, from the cache while the folder is unchanged."""
    if wd.shelf.shared:
        return summed(store.kind_rows(wd.shelf, store.ARCHIVE))
    folder = wd.paths.rounds / "done"
    try:
        st = folder.stat()
    except OSError:
        return {}
    stamp = [st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    cache = wd.paths.state / NAME
    kept = _read(cache, stamp)
    if kept is not None:
        return kept
    tallies = summed(store.kind_rows(wd.shelf, store.ARCHIVE))
    record = {"v": 1, "stamp": stamp, "loops": {k: t.to_json() for k, t in tallies.items()}}
    with contextlib.suppress(OSError):
        jsonio.write_json(cache, record, durable=False)
    return tallies


def _read(cache: Any, stamp: list[int]) -> dict[str, Tally] | None:
    try:
        data = jsonio.read_json(cache)
    except Exception:
        return None
    if not isinstance(data, dict) or data.get("v") != 1 or data.get("stamp") != stamp:
        return None
    loops = data.get("loops")
    if not isinstance(loops, dict):
        return None
    out: dict[str, Tally] = {}
    for name, row in loops.items():
        if not (isinstance(row, list) and len(row) == 3):
            return None
        rounds, tokens, last = row
        if not (_count(rounds) and _count(tokens)):
            return None
        if last is not None:
            ok = isinstance(last, list) and len(last) == 3
            if (
                not ok
                or jsonio.number(last[0]) is None
                or not all(isinstance(x, str) for x in last[1:])
            ):
                return None
            last = (float(last[0]), last[1], last[2])
        out[name] = Tally(rounds, tokens, last)
    return out


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
