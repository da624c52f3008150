"""A full beat whose listing of goals/ is not the recorded one (workdir/goalside.py): the
common case of a human who edited one goal of 10,000. The record still vouches for every
goal whose own listed stat (name, inode, size, mtime, ctime, mode: what the listing
lstat'ed) is the recorded one: it was recorded only from a settled listing (each goal's
mtime and ctime RACY_NS before it), so a later write to that file, even an edit in place
that keeps size and mtime, changed its ctime. Those goals come from the record as the
recorded path makes them (`kept_goals`); only the others are read (workdir/goals.py
`read_goals`, the same caps and refusals), and the goal items framed are the record's
framing with the changed goals' frames spliced in, so the world hash is the full pass's
byte for byte without a pass over 10,000 items.

A link is never taken (its lstat is not what a read follows), nor an unsafe name; a record
that is not whole, not sorted by id, or whose framing does not fit its goals is not used
(the full pass). The record is rewritten only as the full pass rewrites it (`may_remember`).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from itertools import accumulate, compress, repeat
from operator import add, attrgetter, eq, lt
from typing import TYPE_CHECKING

from looop_py import world
from looop_py.ids import is_safe_segment
from looop_py.workdir.goalfile import GoalFile
from looop_py.workdir.goalside import Side
from looop_py.world import STAT_TEXT

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

_FRAME = 16 + len("goal:")  # a goal item's framing: two lengths, and its key's prefix


class Splice:
    """The record (`past`), and per recorded goal whether this listing holds it at its
    recorded stat (`same`); `extra` the listed goals not kept, to be read: {id: stamp};
    `fresh` the goals read or refused once `read_goals` built them, `goals` all of them,
    and `side` the goal side they make (`side_of`, which spends the record: once)."""

    __slots__ = (
        "_sums",
        "digests",
        "extra",
        "fresh",
        "goals",
        "listed_size",
        "past",
        "same",
        "side",
        "spent",
    )

    def __init__(self, past: Side, same: list[bool], sums: list[int], listed_size: int) -> None:
        self.past = past
        self.same = same
        self.digests = list(past.items.values())  # the recorded goals' (side_of spends items)
        self._sums = sums  # the keys' and values' bytes of the recorded items before each
        self.spent = False
        self.listed_size = listed_size  # the bytes of every goal listed, by its lstat
        self.extra: dict[str, str | None] = {}  # the goals listed and not kept: id, stamp
        self.fresh: list[GoalFile] | None = None  # the goals read or refused, by id
        self.goals: list[GoalFile] | None = None  # every goal, by id
        self.side: Side | None = None

    def offset(self, i: int) -> int:
        """Where the recorded goal `i`'s framed item begins in the record's section."""
        return self._sums[i] + _FRAME * i

    def kept(self) -> int:
        return self.same.count(True)

    def fenced(self) -> list[tuple[str, str]]:
        """(id, stamp) of the kept goals that open a `---` fence."""
        past, out = self.past, []
        i = past.fenced.find("1")
        while i >= 0:
            if self.same[i]:
                out.append((past.ids[i], past.stamps[i]))
            i = past.fenced.find("1", i + 1)
        return out


def match(
    past: Side, names: list[str], flat: list[int], spoil: Callable[[], None]
) -> tuple[Splice, list[tuple[str, str | None]]] | None:
    """The splice of the record `past` (of another listing) for goals/'s plain goals
    (`names`, each with five stat numbers in `flat`, as workdir/listing.py `Seen.goals` takes
    them), and their (id, stamp), in id order for those recorded, then the new ones; None:
    a record not to use.
    `spoil`: told of a new .md whose name is no goal (the seal's listing then vouches not)."""
    if not all(map(lt, past.ids, past.ids[1:])):  # sorted, no id twice
        return None
    sums = _sums(past)
    if sums is None or sums[-1] + _FRAME * len(past.ids) != len(past.section):
        return None  # the framing is not these goals'
    # Each listed goal's stamp, by name; the record's ids looked up as names (no id list).
    stamps = map(STAT_TEXT.__mod__, zip(*(flat[k::5] for k in range(5)), strict=True))
    listed = dict(zip(names, stamps, strict=True))
    got = list(map(listed.get, map(add, past.ids, repeat(".md"))))
    same = list(map(eq, got, past.stamps))
    found: list[tuple[str, str | None]]
    found = list(zip(past.ids, past.stamps, strict=True))  # the record's strings, not copies
    gone = False
    extra: dict[str, str | None] = {}
    for i in _dropped(same):
        found[i] = (past.ids[i], got[i])  # changed, or (None) gone
        gone = gone or got[i] is None
        if got[i] is not None:
            extra[past.ids[i]] = got[i]
    if gone:
        found = [pair for pair in found if pair[1] is not None]
    if len(found) < len(listed):  # new names
        for name in listed.keys() - {f"{goal_id}.md" for goal_id in past.ids}:
            goal_id = name[:-3]
            if is_safe_segment(goal_id):
                found.append((goal_id, listed[name]))
                extra[goal_id] = listed[name]
            else:
                spoil()
    splice = Splice(past, same, sums, sum(flat[1::5]))
    splice.extra = extra
    return splice, found


def _sums(past: Side) -> list[int] | None:
    """The bytes of the recorded items' keys (less "goal:") and values before each, as the
    world's framing encodes them; None: one that framing could not encode."""
    ids, digests = past.ids, list(past.items.values())
    if ("".join(ids) + "".join(digests)).isascii():  # goal ids and digests always are
        sizes: Iterable[int] = map(add, map(len, ids), map(len, digests))
    else:
        try:
            sizes = [len(a.encode()) + len(b.encode()) for a, b in zip(ids, digests, strict=True)]
        except UnicodeEncodeError:
            return None
    return list(accumulate(sizes, initial=0))


def kept_goals(folder: Path, splice: Splice) -> list[GoalFile]:
    """A GoalFile per kept goal, not read, as the recorded path builds them (goals.py
    `_known`: no constructor call)."""
    past = splice.past
    new, out = object.__new__, list[GoalFile]()
    add_one = out.append
    rows = zip(past.ids, past.stamps, splice.digests, past.fenced, strict=True)
    for goal_id, stamp, digest, flag in compress(rows, splice.same):
        goal = new(GoalFile)
        goal.id, goal.folder, goal._body, goal.error = goal_id, folder, None, None
        goal.stamp, goal.digest, goal.fenced = stamp, digest, flag == "1"
        add_one(goal)
    return out


def merged(kept: list[GoalFile], fresh: list[GoalFile]) -> list[GoalFile]:
    """`kept` with `fresh` put in (each in id order): one list in id order. A few are put in
    where they go (no sort of 10,000 by a key per goal)."""
    by_id = attrgetter("id")
    if len(fresh) > 64:
        kept += fresh
        kept.sort(key=by_id)
        return kept
    for goal in fresh:
        insort(kept, goal, key=by_id)
    return kept


def side_of(splice: Splice) -> Side | None:
    """The goal side this beat's goals (`splice.goals`, once read) make: their items, and
    those items framed as the world hash frames them, the record's frames of the kept goals
    with the others' spliced in between. Only `items` and `section` are this beat's (SENSE
    hashes them, `goals.remember` records them): its ids, stamps and fences are left empty."""
    if splice.side is not None or splice.goals is None or splice.fresh is None or splice.spent:
        return splice.side  # None once spent: goals read again are hashed item by item
    past, fresh, goals = splice.past, splice.fresh, splice.goals
    splice.spent = True
    events = [(bisect_left(past.ids, g.id), 0, n) for n, g in enumerate(fresh)]
    events += [(i, 1, 0) for i in _dropped(splice.same)]
    events.sort()  # by place in the record; a goal read before the record's own is dropped
    parts: list[bytes | memoryview] = []
    items = past.items  # changed in place: the same keys in the same order, while none is new
    new, replaced = False, -1  # replaced: the recorded goal read again, if the last event was
    cur = 0  # the next recorded goal whose frame is not yet taken
    for at, kind, n in events:
        if at > cur:
            parts.append(past.section[splice.offset(cur) : splice.offset(at)])
            cur = at
        if kind == 0:
            g = fresh[n]
            parts.append(world.framed({f"goal:{g.id}": g.digest}))
            items[f"goal:{g.id}"] = g.digest
            if at < len(past.ids) and past.ids[at] == g.id:
                replaced = at
            else:
                new = True
        else:
            if replaced != at:
                del items[f"goal:{past.ids[at]}"]  # gone
            cur = at + 1
    parts.append(past.section[splice.offset(cur) :])
    if new:  # in id order
        items = {f"goal:{g.id}": g.digest for g in goals}
    past.items, past.section, splice._sums = {}, b"", []  # spent: memory back before the record
    splice.side = Side(
        "", past.record, [], stamps=[], items=items, fenced="", section=b"".join(parts)
    )
    return splice.side


def _dropped(same: list[bool]) -> list[int]:
    """The indices of the recorded goals not kept (changed or gone)."""
    out: list[int] = []
    i = -1
    while True:
        try:
            i = same.index(False, i + 1)
        except ValueError:
            return out
        out.append(i)
