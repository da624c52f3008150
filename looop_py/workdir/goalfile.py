"""One goal file as a beat saw it (`GoalFile`), and reading one, bounded.

A goal the beat knew by its stat is not opened: `GoalFile.body` reads it on first use and
checks the bytes against the digest the world hashed (workdir/goals.py lists goals/).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from looop_py import jsonio, world
from looop_py.errors import CorruptFile

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir

GOAL_CAP = 1024 * 1024  # past it a goal is not read: an error that names it


class GoalFile:
    """A goal as one beat saw it: its id, the digest the world hashed (`goal:<id>`), the
    file's stat while it was read (`stamp_of`, if it held) and whether it opens a
    frontmatter fence. `error` set: it could not be read, and `body` is a notice saying
    why (stable while the file stays wrong, so it hashes and shows).

    A goal the beat knew by its stat (state/goals-cache.json) was not opened: its `body`
    is read on first use, and if those bytes are not the ones hashed (an edit since) it
    reads as a notice saying so; the next beat sees the edit, since the world committed
    holds the digest this one hashed. So a prompt shows only bytes that were hashed."""

    __slots__ = ("_body", "digest", "error", "fenced", "folder", "id", "stamp")

    def __init__(
        self,
        goal_id: str,
        folder: Path,
        body: bytes | None,
        error: str | None = None,
        stamp: str | None = None,
        *,
        digest: str | None = None,
        fenced: bool | None = None,
    ) -> None:
        self.id = goal_id
        self.folder = folder  # goals/, one Path shared by every goal: no Path per goal
        self._body = body
        self.error = error
        self.stamp = stamp
        if body is not None:
            digest, fenced = world.digest(body), body[:3] == b"---"
        if digest is None or fenced is None:
            raise ValueError("a goal not read needs its digest and fence")
        self.digest = digest
        self.fenced = fenced

    @property
    def path(self) -> Path:
        return self.folder / f"{self.id}.md"

    @property
    def held(self) -> bool:
        """Whether its bytes are in memory (it was read this beat)."""
        return self._body is not None

    @property
    def body(self) -> bytes:
        if self._body is None:
            self._body = self._read_hashed()
        return self._body

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    def _read_hashed(self) -> bytes:
        """The file's bytes if they are the ones hashed, else a notice. No stat: the digest
        says whether they are (a FIFO or a device read as bytes that do not match), and one
        byte past the size the stamp names tells a file that grew."""
        size = int(self.stamp.split(".", 2)[1]) if self.stamp else GOAL_CAP
        body = _read_plain(os.path.join(self.folder, f"{self.id}.md"), min(size, GOAL_CAP))
        if body is not None and world.digest(body) == self.digest:
            return body
        return notice(f"goals/{self.id}.md", CHANGED_SINCE)

    def __repr__(self) -> str:
        return f"GoalFile({self.id!r}, digest={self.digest!r}, error={self.error!r})"


CHANGED_SINCE = "it changed after this beat hashed it; the next beat reads it again"


def _read_plain(path: str, cap: int) -> bytes | None:
    """Up to cap + 1 bytes of `path`, opened without blocking; None if it cannot be."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        # One read: a regular file gives all of it (a short read, never seen on a local
        # file system, would not match the digest and would read as changed).
        return os.read(fd, cap + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def notice(what: str, why: str) -> bytes:
    """What stands in for a file looop would not read: one line naming it and why."""
    return f"(looop could not read {what}: {why}; the loop goes on without it)\n".encode()


def why_not_read(exc: CorruptFile, path: Path) -> str:
    """What CorruptFile says of `path`, without the path (the notice names it)."""
    return exc.message.replace(f"{path} ", "", 1)


def read_goal(goal_id: str, path: Path, cap: int = GOAL_CAP) -> GoalFile | None:
    """One goal file, bounded; None if it vanished; an error GoalFile if it cannot be read."""
    try:
        body, st = jsonio.read_stamped(path, cap)
        return GoalFile(goal_id, path.parent, body, stamp=None if st is None else stamp_of(st))
    except FileNotFoundError:
        return None
    except CorruptFile as exc:
        why = why_not_read(exc, path)
        return GoalFile(goal_id, path.parent, notice(f"goals/{goal_id}.md", why), why)


# A goal's stat as the survey writes it: a string, not the stat_result, so 10,000 goals
# hold 10,000 short strings.
stamp_of = world.stat_text


def read_goal_once(
    wd: WorkDir, goal_id: str, path: Path, cap: int = GOAL_CAP, *, keep: bool = True
) -> GoalFile | None:
    """`read_goal`, read once within a beat's pass over goals/ (`wd.memo.scope()`): the
    loop index reads a goal edited since the last beat and keeps the read (`keep`);
    SENSE takes it from there (and keeps nothing: at 10,000 goals memory stays flat)."""
    reads: dict[str, GoalFile | None] = wd.memo.once("goal-reads", dict)
    if goal_id in reads:
        goal = reads.pop(goal_id) if not keep else reads[goal_id]
    else:
        goal = read_goal(goal_id, path)
        if keep:
            reads[goal_id] = goal
    if goal is None or goal.error is not None or len(goal.body) <= cap:
        return goal
    why = f"is larger than the {jsonio.size_text(cap)} cap"
    return GoalFile(goal_id, path.parent, notice(f"goals/{goal_id}.md", why), why)
