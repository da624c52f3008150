"""goals/ as a watch listed it, in the shape a full beat's listing takes it.

Under `looop up` an inotify watch on goals/ (ops/goalwatch.py) lists the folder once and
then vouches for it until the kernel reports a change there. A full beat that the watch
hands its listing (`Vouch`, passed down from the door: beat/pulse.py `beat(goals_from=)`) takes
these entries instead of listing goals/ and lstat'ing every goal again
(workdir/goals.py `_scan_at`): the same names in listdir's order, the same lstat numbers,
sorted into the same heaps as `_scan_at` sorts a fresh listing's. What follows the listing
(the goal side, the goal cache, the refusals of links and unsafe names, the seal's
listing) is then what a fresh listing would give. The watch says when it vouches; these
are only the entries.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from typing import Protocol

from looop_py.workdir import listing
from looop_py.workdir.listing import Held


class Watched:
    """One listing of goals/: every entry by name in listdir's order, each .md or .sh by the
    numbers of its lstat (inode, size, mtime and ctime in ns, mode)."""

    __slots__ = ("folder", "goals", "links", "numbers", "others", "record", "sh")

    def __init__(self, folder: os.stat_result) -> None:
        self.folder = (folder.st_dev, folder.st_ino)  # the folder listed
        self.goals: list[str] = []  # the .md entries that are no symlink
        self.numbers: list[int] = []  # five per goal, as `_scan_at` keeps them
        self.links: dict[str, os.stat_result] = {}  # the .md symlinks, each by its lstat
        self.others: list[str] = []  # every other entry
        self.sh: dict[str, os.stat_result] = {}  # the lstat of each .sh entry among them
        self.record: tuple[str, str] | None = None  # goals/'s stat text, its `g goals` line

    def copy(self) -> Watched:
        """Another listing with these entries (the goals' numbers a list of its own)."""
        other = object.__new__(Watched)
        other.folder, other.goals, other.numbers = self.folder, self.goals, self.numbers[:]
        other.links, other.others, other.sh = self.links, self.others, self.sh
        other.record = None
        return other

    def lstat(self, name: str, /, *, dir_fd: int | None = None) -> os.stat_result:
        """The lstat of a .sh entry, as it was listed (os.lstat's signature)."""
        return self.sh[name]


def take(fd: int, folder: os.stat_result) -> tuple[Watched, list[tuple[str, os.stat_result]]]:
    """goals/, open as `fd` (its fstat `folder`), listed: one lstat per .md or .sh entry. And
    the entries whose change need not raise an event in goals/ (a symlink, a file with
    another hard link, anything not a regular file), each with its lstat. Raises OSError
    (an entry gone while listed, among others)."""
    held = Watched(folder)
    goals, numbers, links, others, sh = held.goals, held.numbers, held.links, held.others, held.sh
    unproven: list[tuple[str, os.stat_result]] = []
    lstat, is_link, is_file = os.lstat, stat.S_ISLNK, stat.S_ISREG
    for name in os.listdir(fd):  # in listdir's order, as the beat's own listing takes it
        tail = name[-3:]
        if tail not in (".md", ".sh"):
            others.append(name)
            continue
        st = lstat(name, dir_fd=fd)
        mode = st.st_mode
        if tail == ".sh":
            others.append(name)
            sh[name] = st
        elif is_link(mode):
            links[name] = st
        else:
            goals.append(name)
            numbers += (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, mode)
        if not is_file(mode) or st.st_nlink != 1:
            unproven.append((name, st))
    return held, unproven


def for_seal(
    vouch: Vouch,
    held: Watched,
    found: Sequence[tuple[str, str | None]],
    refused: dict[str, str],
    goals: Sequence[Held],
) -> tuple[str, str, dict[str, str]] | None:
    """The seal's listing of goals/ (`listing.for_seal`) from the watch's listing the beat
    took, where the beat's own record is not reused because goals/ had changed within
    RACY_NS before it was listed (an entry added in the same clock tick could leave its stat
    equal): the watch's events say so instead. Only while the watch still vouches for it
    (`Vouch.holds`, asked as the seal surveys) and it holds nothing `listing.Seen` would refuse: no
    .md or .sh symlink, no .md that is no goal; None otherwise (the survey lists goals/)."""
    if held.record is None or held.links or len(found) != len(held.goals) or refused:
        return None
    if any(stat.S_ISLNK(st.st_mode) for st in held.sh.values()) or not vouch.holds(held):
        return None
    return listing.for_seal(found, refused, held.record, goals)


class Vouch(Protocol):
    """A watch on goals/ (ops/goalwatch.py GoalWatch), as a full beat asks it."""

    def vouched(self, fd: int) -> Watched | None:
        """goals/, open as `fd`: its entries as the watch vouches for them now, or None (no
        vouching: the beat lists goals/ itself)."""

    def holds(self, held: Watched) -> bool:
        """Whether the watch still vouches for `held`, its listing, now."""
