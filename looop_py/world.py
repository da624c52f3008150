"""The world as the loop sees it (docs/internals.md, DIFF): the item map, its hash, the diff. Pure.

Items, in this fixed order:
  playbook        → xxh3 of PLAYBOOK.md
  goal:<id>       → xxh3 of goals/<id>.md, by id
  snap:<stem>     → canonical JSON of the snapshot's signal, by stem
The world hash is xxh3_128 over each key and value, each prefixed by its
length, so no two different maps can frame into the same byte stream.
Detail never enters; neither does time.
"""

from __future__ import annotations

import xxhash

# typing (nor collections, ~2 ms) is not imported at run time: a quiet beat is bound by
# start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, Final

PREFIX = "xxh3:"


def digest(data: bytes | memoryview) -> str:
    return PREFIX + xxhash.xxh3_128_hexdigest(data)


def stat_text(st: os.stat_result) -> str:
    """A file's stat as the seal's survey, the goal cache and the goals' listing all write
    it (inode, size, mtime and ctime in ns, mode): one spelling, so their texts compare."""
    return STAT_TEXT % (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


# `stat_text` of a stat's numbers (a %-format of five ints is a third cheaper than an f-string
# that looks each one up: the goals' listing formats 10,000 of them)
STAT_TEXT = "%d.%d.%d.%d.%d"


GONE = (-1, -1, -1, -1, -1)  # listed, then gone before its stat: no stat has these
_MASK = (1 << 64) - 1


def listing_digest(names: list[str], numbers: list[int]) -> str:
    """The DIGEST of the seal's `g goals COUNT DIGEST` (sensing/survey.py goals_line): the
    sorted names through xxh3 once, joined (no name holds a slash), and the stat numbers
    (inode, size, mtime and ctime in ns, mode of each .md or .sh file, GONE for one that
    went) as one tuple of ints, whose hash has no per-process seed."""
    body = "/".join(names).encode("utf-8", "surrogateescape")
    return f"{digest(body)}.{hash(tuple(numbers)) & _MASK:x}"


def build_items(
    playbook: bytes | None,
    goals: Iterable[tuple[str, bytes]],
    snapshots: Iterable[tuple[str, Any]],
) -> dict[str, str]:
    """The item map; `snapshots` yields (stem, signal) pairs."""
    return build_items_digested(
        playbook, ((goal_id, digest(body)) for goal_id, body in goals), snapshots
    )


def build_items_digested(
    playbook: bytes | None,
    goals: Iterable[tuple[str, str]],
    snapshots: Iterable[tuple[str, Any]],
) -> dict[str, str]:
    """`build_items` with each goal given by its `digest` (a goal cache knows it unread)."""
    from looop_py import jsonio  # canonical JSON: the quiet beat compares digests instead

    items: dict[str, str] = {}
    if playbook is not None:
        items["playbook"] = digest(playbook)
    for goal_id, goal_digest in sorted(goals):
        items[f"goal:{goal_id}"] = goal_digest
    for stem, signal in sorted(snapshots, key=lambda pair: pair[0]):
        items[f"snap:{stem}"] = jsonio.canonical(signal).decode("utf-8")
    return items


def world_hash(items: Mapping[str, str]) -> str:
    """The world hash alone (`hashes`, which a beat uses, works out the policy hash too)."""
    return hashes(items)[0]


def hashes(items: Mapping[str, str]) -> tuple[str, str]:
    """(the world hash, the policy hash) in one pass: the policy hash is the world hash of
    the items a human edits (PLAYBOOK.md, the goals) in the map's order; a change to them
    cuts a backoff short (beat/decide.py). SENSE works both out once, not the goals twice."""
    whole, policy = xxhash.xxh3_128(), xxhash.xxh3_128()
    _feed(items, whole.update, policy.update)
    return PREFIX + whole.hexdigest(), PREFIX + policy.hexdigest()


def hashes_framed(
    head: Mapping[str, str], goals_framed: bytes | memoryview, tail: Mapping[str, str]
) -> tuple[str, str]:
    """`hashes` of `{**head, **goals, **tail}` given the goal items already framed
    (`framed(goals)`, kept beside the listing that vouches for them: workdir/goalside.py):
    the same two hashes with no pass over 10,000 goal items."""
    whole, policy = xxhash.xxh3_128(), xxhash.xxh3_128()
    _feed(head, whole.update, policy.update)
    whole.update(goals_framed)
    policy.update(goals_framed)
    _feed(tail, whole.update, policy.update)
    return PREFIX + whole.hexdigest(), PREFIX + policy.hexdigest()


def digester() -> tuple[Callable[[bytes], object], Callable[[], str]]:
    """(update, result): `digest` of all the bytes given to update, in parts."""
    h = xxhash.xxh3_128()
    return h.update, lambda: PREFIX + h.hexdigest()


def framed(items: Mapping[str, str]) -> bytes:
    """The items as the world hash frames them: each key and value prefixed by its length."""
    out: list[bytes] = []
    _feed(items, out.append, None)
    return b"".join(out)


def _feed(items: Mapping[str, str], update: Callable[[bytes], object], update_policy: Any) -> None:
    """Each item framed (its key and value, each after its length), one update per item."""
    for key, value in items.items():
        k, v = key.encode("utf-8"), value.encode("utf-8")
        frame = b"".join((len(k).to_bytes(8, "big"), k, len(v).to_bytes(8, "big"), v))
        update(frame)
        if update_policy is not None and (key[:5] == "goal:" or key == "playbook"):
            update_policy(frame)


class Change:
    """One item that differs. A plain class, not a dataclass: the quiet beat imports this module
    and must not import `dataclasses`. `Final` keeps the fields read-only for the type checker."""

    __slots__ = ("item", "new", "old")
    __match_args__ = ("item", "old", "new")
    item: Final[str]
    old: Final[str | None]  # None: the item appeared
    new: Final[str | None]  # None: the item is gone

    def __init__(self, item: str, old: str | None, new: str | None) -> None:
        self.item = item
        self.old = old
        self.new = new

    def __repr__(self) -> str:
        return f"Change(item={self.item!r}, old={self.old!r}, new={self.new!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Change):
            return NotImplemented
        return (self.item, self.old, self.new) == (other.item, other.old, other.new)

    def __hash__(self) -> int:
        return hash((self.item, self.old, self.new))

    @property
    def kind(self) -> str:
        if self.old is None:
            return "appeared"
        return "gone" if self.new is None else "changed"

    def to_json(self, limit: int = 240) -> dict[str, Any]:
        return {"item": self.item, "old": _clip(self.old, limit), "new": _clip(self.new, limit)}


def _clip(value: str | None, limit: int) -> str | None:
    if value is None or len(value) <= limit:
        return value
    return value[: limit - 1] + "…"


def diff(old: Mapping[str, str], new: Mapping[str, str]) -> list[Change]:
    """What changed between two item maps, in the new map's order, then what went."""
    if old == new:  # one compare in C: a forced beat at 10,000 goals often changed nothing
        return []
    changes = [Change(k, old.get(k), v) for k, v in new.items() if old.get(k) != v]
    changes += [Change(k, v, None) for k, v in old.items() if k not in new]
    return changes


def is_error_signal(signal_value: Any) -> bool:
    """A broken sensor's signal: `{"error": …}` (a non-zero exit, too large, not UTF-8)."""
    return isinstance(signal_value, dict) and bool(signal_value.get("error"))
