"""goals/ as a watch listed it, in the shape a full beat's listing takes it.

Under `looop up` an inotify watch on goals/ (ops/goalwatch.py) lists the folder once and
then vouches for it until the kernel reports a change there. A full beat that the watch
hands its listing (`Vouch`, passed down from the door: beat/pulse.py `beat(goals=)`) takes
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
from collections.abc import Callable


class Watched:
    """One listing of goals/: every entry by name in listdir's order, each .md or .sh by the
    numbers of its lstat (inode, size, mtime and ctime in ns, mode)."""

    __slots__ = ("folder", "goals", "links", "numbers", "others", "sh")

    def __init__(self, folder: os.stat_result) -> None:
        self.folder = (folder.st_dev, folder.st_ino)  # the folder listed
        self.goals: list[str] = []  # the .md entries that are no symlink
        self.numbers: list[int] = []  # five per goal, as `_scan_at` keeps them
        self.links: dict[str, os.stat_result] = {}  # the .md symlinks, each by its lstat
        self.others: list[str] = []  # every other entry
        self.sh: dict[str, os.stat_result] = {}  # the lstat of each .sh entry among them

    def add(self, name: str, st: os.stat_result | None) -> None:
        """An entry, with its lstat if it is an .md or .sh file (None: a name only)."""
        if name[-3:] != ".md":
            self.others.append(name)
            if st is not None:
                self.sh[name] = st
            return
        assert st is not None, "an .md entry comes with its lstat"
        if stat.S_ISLNK(st.st_mode):
            self.links[name] = st
        else:
            self.goals.append(name)
            self.numbers += (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)

    def lstat(self, name: str, /, *, dir_fd: int | None = None) -> os.stat_result:
        """The lstat of a .sh entry, as it was listed (os.lstat's signature)."""
        return self.sh[name]


# goals/ opened as the descriptor given -> its entries as the watch vouches for them now,
# or None (no vouching: the beat lists goals/ itself).
Vouch = Callable[[int], Watched | None]
