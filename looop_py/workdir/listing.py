"""goals/ as a full beat listed it, for the seal: one pass over the folder serves the loop
index, SENSE and the seal's survey, which then lstats no goal again.

The listing stats goals/ itself first, then each entry once (DirEntry's lstat, which the
goal's own stamp reuses). The seal's survey takes the listing's `g goals ...` line instead
of listing and lstat'ing goals/ again when (sensing/survey.py `Listed`, `for_seal`):
- goals/ is the folder it was (its lstat text unchanged since the listing) and had not
  changed within RACY_NS before the listing (a change in the same clock tick as the
  listing's stat could leave it equal): no entry was added, removed or renamed since;
- nothing was refused, no .md or .sh entry is a symlink (its lstat is not what was read),
  no .md entry is a file that is not a goal;
- every goal the world holds carries the stamp it was listed with (none was re-read at
  another stat).
Then each goal's sealed stat is the one its hashed bytes were read or known at, so a goal
edited after the listing no longer matches the seal: the next quiet beat sees its new
stat and runs a full beat. The seal never vouches for bytes the world did not hash.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Sequence
from operator import itemgetter
from typing import Protocol

from looop_py.workdir.goalcache import RACY_NS
from looop_py.world import GONE, listing_digest, stat_text


class Lstat(Protocol):  # os.lstat, or the lstat a watch listed (workdir/watched.py)
    def __call__(self, name: str, /, *, dir_fd: int | None = ...) -> os.stat_result: ...


class Held(Protocol):  # a goal the world holds (workdir/goalfile.py GoalFile)
    @property
    def id(self) -> str: ...
    @property
    def stamp(self) -> str | None: ...


class Seen:
    """What one scandir of goals/ saw, as the survey's goals line would. Each goal's stat
    numbers go into one flat list beside its name, no tuple per goal: at 10,000 goals the
    listing held ~1.4 MB of tuples while the beat's memory peaked."""

    __slots__ = ("_bare", "_folder", "_names", "_numbers", "_ok", "now_ns")

    def __init__(self, folder: str) -> None:
        self._names: list[str] = []  # the goals (and .sh files), in listing order
        self._numbers: list[int] = []  # five per name in _names: inode, size, mtime, ctime, mode
        self._bare: list[str] = []  # the other names: the survey takes no stat of them
        self._folder: str | None = None
        self._ok = True
        self.now_ns = 0  # when goals/ was stat'ed (the clock file times come from)
        try:
            st = os.lstat(folder)  # before the entries: a later change moves it
        except OSError:
            self._ok = False
            return
        now_ns = self.now_ns = time.time_ns()  # the clock file times come from, not the wd's
        if stat.S_ISDIR(st.st_mode) and max(st.st_mtime_ns, st.st_ctime_ns) <= now_ns - RACY_NS:
            self._folder = stat_text(st)
        else:
            self._ok = False

    def other(self, name: str, folder_fd: int, lstat: Lstat = os.lstat) -> None:
        """An entry that is not a goal: a name, or (.sh, an .md that is no goal) its lstat,
        taken relative to goals/'s descriptor (`lstat`: as a watch listed it)."""
        if not name.endswith((".md", ".sh")):
            self._bare.append(name)
            return
        if name.endswith(".md"):
            self._ok = False  # the survey counts it among the goals, the world does not
            return
        try:
            st = lstat(name, dir_fd=folder_fd)
        except FileNotFoundError:
            self.goal(name, GONE)
            return
        except OSError:
            self._ok = False
            return
        if stat.S_ISLNK(st.st_mode):
            self._ok = False  # a linked .sh: its lstat is not what a read follows
        else:
            self.goal(name, (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode))

    def goals(self, names: list[str], flat: list[int]) -> None:
        """Goals by name, each with its five stat numbers in `flat` (as `goal` takes them).
        The first lists given are kept, not copied (the caller only reads them after)."""
        if not self._ok:
            return
        if self._names:
            self._names += names
            self._numbers += flat
        else:
            self._names, self._numbers = names, flat

    def spoil(self) -> None:
        """An .md entry that is no goal: the survey counts it among the goals, the world not."""
        self._ok = False

    @property
    def ok(self) -> bool:
        return self._ok

    def goal(self, name: str, nums: tuple[int, int, int, int, int] | None) -> None:
        """A goal by the numbers (inode, size, mtime and ctime in ns, mode) of the stat the
        beat took of it; None: none, or a link's (its lstat is another: not reused)."""
        if nums is None:
            self._ok = False
        elif self._ok:
            self._names.append(name)
            self._numbers += nums

    def record(self, line: str | None = None) -> tuple[str, str] | None:
        """(goals/'s stat text, its `g goals COUNT DIGEST` line), or None: not to be reused.
        `line`: that line as a watch worked it out from these very entries (ops/goalwatch.py)."""
        if not self._ok or self._folder is None:
            return None
        if line is not None:
            return self._folder, line
        names = self._names
        order, numbers = in_name_order(names, self._numbers)
        every = sorted([*names, *self._bare]) if self._bare else list(map(names.__getitem__, order))
        return self._folder, f"g goals {len(every)} {listing_digest(every, numbers)}"

    def key(self) -> tuple[str, str] | None:
        """(goals/'s stat text, `k GOALS ENTRIES DIGEST`): the listing in the order listdir
        gave it, for state/goals-seen.bin to be compared against (workdir/goalside.py). No
        sort: the same entries at the same stats list in the same order while goals/'s own
        stat holds, and an equal key is an equal listing, so the recorded `record()` is this
        one's; an order that moved is only a miss (the full pass)."""
        if not self._ok or self._folder is None:
            return None
        names, bare = self._names, self._bare
        every = [*names, *bare] if bare else names
        return self._folder, f"k {len(names)} {len(every)} {listing_digest(every, self._numbers)}"

    def settled(self) -> bool:
        """Whether every goal's mtime and ctime are at least RACY_NS before goals/ was listed:
        a later write to any of them changes its stat (goalcache.trusted, for all at once)."""
        flat = self._numbers
        newest = max(max(flat[2::5], default=0), max(flat[3::5], default=0))
        return self._ok and newest <= self.now_ns - RACY_NS


def in_name_order(names: Sequence[str], flat: list[int]) -> tuple[list[int], list[int]]:
    """The indices of `names` (unique) sorted by name, and `flat` (five lstat numbers per
    name, as `Seen.goals` takes them) in that order: each of the five columns at once, in C."""
    order = sorted(range(len(names)), key=names.__getitem__)
    numbers = flat[:]
    if len(order) > 1:  # (itemgetter of one index gives the item, not a tuple)
        pick = itemgetter(*order)
        for k in range(5):
            numbers[k::5] = pick(flat[k::5])
    return order, numbers


def for_seal(
    found: Sequence[tuple[str, str | None]],
    refused: dict[str, str],
    record: tuple[str, str] | None,
    held: Sequence[Held],
    *,
    known: Sequence[Held] = (),
) -> tuple[str, str, dict[str, str]] | None:
    """The listing as the seal's survey takes it (sensing/survey.py `Listed`), or None.
    `known`: the goals made from the recorded side at the listed stamps (workdir/goalside.py);
    held being those very objects, no goal is compared again."""
    if record is None or refused:
        return None
    # Held in the listing's order (SENSE reads in it), each at its listed stamp: one compare
    # (none when held is the side's own goals: a tuple compare of identities, in C).
    if not (known and known == held) and [(g.id, g.stamp) for g in held] != list(found):
        return None
    stats = {f"goals/{gid}.md": s for gid, s in found if s is not None}
    if len(stats) != len(found):  # a goal gone or unreadable while listed: not vouched
        return None
    return record[0], record[1], stats
