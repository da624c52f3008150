"""goals/ as inotify vouches for it while `looop up` runs: a quiet beat stats no goal.

The quiet beat compares goals/ by one survey line, `g goals COUNT DIGEST` (sensing/
survey.py `goals_line`), and that line takes an lstat of every goal: an edit in place
changes only the file's own stat, not the folder's. At 10,000 goals those calls are
~27 ms of kernel time on a small VM, in any language. A resident process can do what
git's fsmonitor does for `git status`: hold an inotify watch on goals/ and list it again
only after the kernel reported a change there. `GoalWatch.listed` gives the survey the
line (with goals/'s own stat when it was listed), and the survey takes it while goals/
still has that stat (`survey._listed`). A full beat under `up` takes the same listing
(`vouched`: names, lstat numbers, links and .sh entries apart, workdir/watched.py) instead
of an lstat per goal, and after a goal edit the watch's listing is the beat's only one; the
seal then takes the watch's line too while it `holds`.

What it vouches for, and what it does not:
- the watch is added before the listing it vouches for, and the events queued so far are
  read before each listing: a change after the read is an event the next call sees;
- any event in goals/ (a write, an attribute, an entry created, deleted or renamed in or
  out; dot-names too) means list again; so does goals/ itself deleted, moved or replaced
  (IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED, another inode at the path: watched again)
  and an overflowing event queue. Except: when every event since the listing named a
  plain goal of it (a regular file with one link) and said only that it was written or
  its attributes changed, no entry came or went, so the listing is kept and those goals
  alone are lstat'ed again (`_patched`; one no longer plain: listed in full);
- no watch, no vouching (None: the survey lists and stats as it always did): goals/
  missing or a symlink, the kernel refusing a watch or an instance
  (fs.inotify.max_user_watches), or a file system whose files may change without this
  kernel seeing it (NFS, SMB, FUSE...: only LOCAL types are trusted);
- an entry whose change need not raise an event in goals/ is lstat'ed at every call: a
  symlink (its target lives elsewhere), a file with another hard link (written through
  that name), anything not a regular file. One that changed: no vouching this time, and
  goals/ is listed again next time.
A write through a shared memory map raises no inotify event at all, nor does a write to
a file bind-mounted over a goal through its other path (fsmonitor's limits too); editors
write files, they neither map nor mount them.
"""

from __future__ import annotations

import os
import stat

from looop_py.ops import inotify
from looop_py.workdir import watched
from looop_py.workdir.listing import in_name_order
from looop_py.workdir.watched import Watched
from looop_py.world import listing_digest, stat_text

MASK = (
    inotify.CHANGES
    | inotify.GONE
    | inotify.IN_MODIFY  # a write still open: IN_CLOSE_WRITE comes only when it closes
    | inotify.IN_UNMOUNT
    | inotify.IN_DONT_FOLLOW  # goals/ a symlink: not watched (its target may be anywhere)
)
# Events that say an entry was written or its attributes changed: which entries there
# are did not change.
IN_PLACE = inotify.IN_MODIFY | inotify.IN_CLOSE_WRITE | inotify.IN_ATTRIB
# File systems whose every change passes through this kernel's inotify.
LOCAL = frozenset(
    [
        "ext2",
        "ext3",
        "ext4",
        "xfs",
        "btrfs",
        "tmpfs",
        "ramfs",
        "f2fs",
        "zfs",
        "bcachefs",
        "jfs",
        "reiserfs",
        "overlay",
    ]
)
Listed = tuple[str, str, dict[str, str]]  # sensing/survey.py `Listed`


class GoalWatch:
    """One inotify watch on goals/, and the survey's line for goals/ it vouches for."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.listings = 0  # how many times goals/ was listed (stat'ing every goal)
        self.restats = 0  # how many times goals written in place were lstat'ed again alone
        self._ino: inotify.Inotify | None = None
        self._watch: int | None = None
        self._dir: tuple[int, int] | None = None  # (st_dev, st_ino) of the watched folder
        # goals/'s stat text, its `g goals` line and its entries (workdir/watched.py)
        self._line: tuple[str, str, Watched] | None = None
        self._unproven: list[tuple[str, str]] = []  # (name, lstat text) to take every time
        self._written: set[str] = set()  # plain goals written in place since the listing
        self._index: dict[str, int] = {}  # each plain goal's place in the listing's goals

    def listed(self) -> Listed | None:
        """goals/ as the survey writes it, vouched for by the watch; None: no vouching."""
        if not self._vouches():
            return None
        assert self._line is not None
        return self._line[0], self._line[1], {}

    def vouched(self, fd: int) -> Watched | None:
        """goals/'s entries for a full beat's listing (workdir/watched.py `Vouch`): as last
        listed while no event came since and no entry it must lstat each time changed, else
        listed again now (the beat's one listing); None when the watch cannot vouch, or `fd`
        (goals/ as the beat opened it) is not the folder watched."""
        if not self._vouches(relist=True):
            return None
        assert self._line is not None
        held = self._line[2]
        st = os.fstat(fd)
        return held if (st.st_dev, st.st_ino) == held.folder else None

    def holds(self, held: Watched) -> bool:
        """Whether `held`, a listing `vouched` gave, is still the one the watch vouches for
        (no event since, no entry it lstats each time changed)."""
        return self._vouches() and self._line is not None and self._line[2] is held

    def _vouches(self, *, relist: bool = False) -> bool:
        """Whether the watch vouches for its listing now (listed again if an event came);
        `relist`: an entry lstat'ed each time that changed lists goals/ again at once, where
        the survey would list it itself."""
        if not self._armed():
            return False
        if self._changed() and not self._armed():  # goals/ itself went: watched again
            return False
        if self._line is not None and self._written:
            self._line = self._patched()  # None: listed in full
        if self._line is None:
            self._line = self._list()
            if self._line is None:
                return False
        for name, text in self._unproven:
            try:
                now = stat_text(os.lstat(os.path.join(self.folder, name)))
            except OSError:
                now = "-"
            if now != text:
                self._line = None  # the survey stats it all; listed again next time
                if not relist:
                    return False
                self._line = self._list()
                return self._line is not None
        return True

    def changed(self) -> bool:
        """Whether an event came in goals/ since the last call here or to `listed` (which
        then lists goals/ again, or lstats again the goals written in place); False without
        a watch to say."""
        return self._ino is not None and self._watch is not None and self._changed()

    def close(self) -> None:
        if self._ino is not None:
            self._ino.close()
        self._ino, self._watch, self._dir, self._line = None, None, None, None

    def _armed(self) -> bool:
        """The watch is on the folder now at the path (added again if not); False: none."""
        try:
            st = os.lstat(self.folder)
        except OSError:
            self._disarm()
            return False
        if self._watch is not None and (st.st_dev, st.st_ino) == self._dir:
            return True
        self._disarm()
        if not stat.S_ISDIR(st.st_mode) or not local(self.folder):
            return False
        try:
            if self._ino is None:
                self._ino = inotify.Inotify()
            self._watch = self._ino.add(self.folder, MASK)
        except OSError:
            return False  # ENOSPC (max_user_watches), EMFILE, ENOTDIR, ENOENT: no vouching
        try:
            after = os.lstat(self.folder)  # the same folder before and after the watch was
        except OSError:  # added: the watch is on it (else it was replaced meanwhile)
            after = None
        if after is None or (after.st_dev, after.st_ino) != (st.st_dev, st.st_ino):
            self._disarm()
            return False
        self._dir = (st.st_dev, st.st_ino)
        return True

    def _disarm(self) -> None:
        if self._ino is not None and self._watch is not None:
            self._ino.remove(self._watch)
            self._ino.read()  # its IN_IGNORED
        self._watch, self._dir, self._line, self._written = None, None, None, set()

    def _changed(self) -> bool:
        """Whether any event came since the last call (goals/ itself gone: watched again).
        When each named a plain goal of the listing kept and said only that it was written
        or its attributes changed (no entry came, went or was renamed), the listing is kept
        and those goals are lstat'ed again (`_patched`); any other event drops it."""
        assert self._ino is not None
        events = self._ino.read()
        for event in events:
            if event.mask & (inotify.GONE | inotify.IN_UNMOUNT) and not event.name:
                self._disarm()  # the next call watches what is at the path then
                self._line = None
        if events and self._line is not None:
            index = self._index
            if all(e.name in index and not e.mask & ~IN_PLACE for e in events):
                self._written.update(e.name for e in events)
            else:
                self._line = None
        if self._line is None:
            self._written = set()
        return bool(events)

    def _patched(self) -> tuple[str, str, Watched] | None:
        """The listing kept, with the goals written in place since lstat'ed again: no event
        said an entry came, went or was renamed. None when one is no longer a plain file
        with one link, or goals/ is not the folder watched (then listed in full)."""
        assert self._line is not None
        old, written = self._line[2], self._written
        self._written = set()
        self.restats += 1
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            folder = os.fstat(fd)
            if (folder.st_dev, folder.st_ino) != self._dir or old.folder != self._dir:
                return None
            held = old.copy()
            numbers, index = held.numbers, self._index
            for name in written:
                st = os.lstat(name, dir_fd=fd)
                if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                    return None
                at = 5 * index[name]
                numbers[at : at + 5] = (
                    st.st_ino,
                    st.st_size,
                    st.st_mtime_ns,
                    st.st_ctime_ns,
                    st.st_mode,
                )
        except OSError:
            return None
        finally:
            os.close(fd)
        held.record = (stat_text(folder), _goals_line(held))
        return *held.record, held

    def _list(self) -> tuple[str, str, Watched] | None:
        """goals/'s stat, its `g goals` line as survey.goals_line writes it (one lstat a
        goal) and its entries as a full beat takes them (workdir/watched.py), noting the
        entries no event vouches for; None when it cannot be listed."""
        self.listings += 1
        try:
            fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            return None
        try:
            folder = os.fstat(fd)  # before the entries: a later change is an event anyway
            if (folder.st_dev, folder.st_ino) != self._dir:
                return None  # not the folder watched: the next call watches this one
            held, unproven = watched.take(fd, folder)
        except OSError:
            return None  # an entry gone as it was listed: its event lists it again
        finally:
            os.close(fd)
        self._unproven = [(name, stat_text(st)) for name, st in unproven]
        self._written = set()
        plain = set(held.goals).difference(name for name, _ in unproven)
        self._index = {name: i for i, name in enumerate(held.goals) if name in plain}
        held.record = (stat_text(folder), _goals_line(held))
        return *held.record, held


def _goals_line(held: Watched) -> str:
    """`g goals COUNT DIGEST` of the entries listed (survey.goals_line's line): every name
    sorted, and each .md or .sh entry's five lstat numbers in the order of its name."""
    listed = [*held.goals, *held.links, *held.sh]
    flat = held.numbers[:]
    for st in (*held.links.values(), *held.sh.values()):
        flat += (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
    _, numbers = in_name_order(listed, flat)
    every = sorted([*held.goals, *held.links, *held.others])
    return f"g goals {len(every)} {listing_digest(every, numbers)}"


def local(folder: str) -> bool:
    """Whether `folder` is on a file system in LOCAL (/proc/self/mountinfo)."""
    path = os.path.realpath(folder)
    best, kind = "", ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return False
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split(" ")
        if len(fields) < 5 or not right:
            continue
        point = fields[4].replace("\\040", " ").replace("\\011", "\t")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, right.split(" ", 1)[0]
    return kind in LOCAL
