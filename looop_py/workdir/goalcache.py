"""state/goals-cache.json: what a beat learnt of each goal file, keyed by the file's full stat.

A full beat at 10,000 goals opened 10,000 files to hash bytes it hashed the beat before.
The cache keeps, per goal, the stat the file had while it was read (`stamp_of`: inode,
size, mtime, ctime and mode) with the digest of its bytes and whether it opens a
frontmatter fence; a goal whose stat is that one is not opened again. The key holds the
ctime, which no one can set back, so an edit in place that keeps the size and puts the
mtime back still misses. Nor is a goal trusted that changed within `RACY_NS` of the read:
a file's times come from the kernel's coarse clock (one tick, 4-10 ms, behind the fine
one), and a second write in the tick of the read would keep the stat (git's "racily
clean" entries); such a goal is read again next beat.

One string per goal: `STAMP HEX FENCED`, and ` racy` after one read too soon to be
trusted (listed all the same, so the file names every goal). A file that does not parse,
is not this version or holds an entry of another shape is ignored and written afresh: it
is a cache, never a record. (What no stat cache can catch is an entry forged whole for
the file's current stat; state/ is looop's own, as the quiet seal beside it is.)
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import TYPE_CHECKING

from looop_py import jsonio

if TYPE_CHECKING:
    from collections.abc import Sequence

    from looop_py.workdir.context import WorkDir

VERSION = 1
# A goal changed this close before the beat began is read again next beat: past it, the
# coarse clock files are stamped by has moved on, so any later write changes the stat.
RACY_NS = 50_000_000
_PREFIX = "xxh3:"  # world.PREFIX: the digest is stored without it
_TAILS = re.compile(r"(?: [0-9a-f]{32} [01])*")  # what follows the stamp in entries


class GoalCache:
    """The cache as one beat uses it: `known` for the listing's stamps, `put` what a read learnt,
    `save` once at the end (only when something changed)."""

    __slots__ = ("_entries", "_seen", "changed", "wd")

    def __init__(self, wd: WorkDir, entries: dict[str, str]) -> None:
        self.wd = wd
        self._entries = entries
        self._seen: set[str] = set()
        self.changed = False

    def known(self, found: Sequence[tuple[str, str | None]]) -> dict[str, tuple[str, bool]]:
        """For a listing's (id, stamp) pairs, {id: (digest, fenced)} of the goals whose file
        still has the stamp the cache holds for them (an entry `STAMP HEX 0|1`, the hex
        a digest this module wrote; a racy or malformed entry is no hit). One pass of
        string compares, no split: the loop index and SENSE share its answer."""
        get = self._entries.get
        # An entry is `STAMP HEX 0|1`: its head (all but the last 35 characters) is the stamp.
        same = {g: e for g, stamp in found if (e := get(g)) is not None and e[:-35] == stamp}
        tails = "".join(e[-35:] for e in same.values())
        if not _TAILS.fullmatch(tails):  # one check for all; a damaged entry: one by one
            same = {g: e for g, e in same.items() if _TAILS.fullmatch(e, len(e) - 35)}
        self._seen.update(goal_id for goal_id, _ in found)
        return {g: (_PREFIX + e[-34:-2], e[-1] == "1") for g, e in same.items()}

    def put(self, goal_id: str, stamp: str | None, digest: str, fenced: bool, now_ns: int) -> None:
        """Remember a goal read whole at `stamp` (None: it changed while it was read)."""
        self._seen.add(goal_id)
        entry = None
        if stamp is not None and digest.startswith(_PREFIX):
            entry = f"{stamp} {digest.removeprefix(_PREFIX)} {int(fenced)}"
            if not trusted(stamp, now_ns):
                entry += " racy"  # written down, never a hit: the next beat reads it again
        if self._entries.get(goal_id) != entry:
            self.changed = True
            if entry is None:
                self._entries.pop(goal_id, None)
            else:
                self._entries[goal_id] = entry

    def save(self) -> None:
        """Write the cache when an entry changed or a goal went (entries for goals not seen
        this beat are dropped)."""
        gone = self._entries.keys() - self._seen
        if not (self.changed or gone):
            return
        for goal_id in gone:
            del self._entries[goal_id]
        record = {"v": VERSION, "goals": self._entries}
        with contextlib.suppress(OSError):  # a cache: a beat that cannot write it goes on
            jsonio.atomic_write(self.wd.paths.goals_cache, jsonio.dumps(record), durable=False)
        self.changed = False


def trusted(stamp: str, now_ns: int) -> bool:
    """Whether a goal read at `stamp` may be known by that stat from now on: its mtime and
    ctime are at least RACY_NS before `now_ns` (a stamp that does not parse: never)."""
    parts = stamp.split(".")
    try:
        mtime_ns, ctime_ns = int(parts[2]), int(parts[3])
    except (IndexError, ValueError):
        return False
    return max(mtime_ns, ctime_ns) <= now_ns - RACY_NS


def hits(wd: WorkDir, found: list[tuple[str, str | None]]) -> dict[str, tuple[str, bool]]:
    """`known` for this beat's listing of goals/, worked out once within the beat's pass
    (`wd.memo.scope()`): the loop index (ADVANCE) and SENSE ask the same."""
    return wd.memo.once(("goal-hits", wd.paths.goals_cache), lambda: of_beat(wd).known(found))


def of_beat(wd: WorkDir) -> GoalCache:
    """The cache, loaded once within a beat's pass over goals/ (`wd.memo.scope()`): the
    loop index (ADVANCE) and SENSE ask the same one."""
    return wd.memo.once(("goals-cache", wd.paths.goals_cache), lambda: load(wd))


def load(wd: WorkDir) -> GoalCache:
    """The cache as state/ holds it; an empty one when there is none that fits."""
    data = jsonio.read_object(wd.paths.goals_cache)
    goals = data.get("goals") if data is not None and data.get("v") == VERSION else None
    entries: dict[str, str] = {}
    if isinstance(goals, dict):
        entries = {k: v for k, v in goals.items() if isinstance(v, str)}
    return GoalCache(wd, entries)


def now_ns() -> int:
    """The wall clock the file system stamps times with (not the work dir's clock, which a
    test may fix: a file's ctime is always real time). Taken before the reads: a goal
    changed RACY_NS before it was last changed before its read, too."""
    return time.time_ns()
