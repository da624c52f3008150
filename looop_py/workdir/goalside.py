"""state/goals-seen.bin: the goal side of the world as a full beat last listed goals/, kept
beside the listing that vouches for it.

Most full beats at 10,000 goals run because a sensor changed (or `--force`), while goals/ is
exactly as it was. One listing proves that, as the quiet beat's seal does: goals/'s own stat
and one digest of every entry's name and stat (workdir/listing.py `Seen.key`, taken in the
order listdir gives them: no sort). When this beat's listing is the one recorded here, every
goal is at the stat whose bytes the recorded digest hashed, so the beat takes the goal side
from this file (ids, stamps, digests, fences, the goal items framed as the world hash frames
them, and the seal's sorted `g goals` line) instead of the goal cache and one object per
goal per pass.

It is written only when it can vouch, by a beat whose listing:
- the seal could take (`Seen.record`: no link, no .md that is no goal, goals/ not changed
  within RACY_NS of the listing), with nothing refused;
- holds every goal at the stamp its hashed bytes were read or known at (no error, none
  changed while read);
- is settled: every goal's mtime and ctime at least RACY_NS before the listing, so a later
  write, even one in the same tick of the file system's clock, changes a stat.

A file that does not parse, fails its checksum or records another listing is ignored, and
the beat takes the full pass (which writes it afresh). It is a cache, never trusted over the
listing. (As with the goal cache, what it cannot catch is a file forged whole, checksum and
all, for the current listing: state/ is looop's own.)
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import TYPE_CHECKING

from looop_py import jsonio, world

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path

    from looop_py.workdir.listing import Held

MAGIC = b"looop goals-seen 4"
CAP = 64 * 1024 * 1024  # a file past this is not read (10,000 goals: ~2 MB)
# The file: MAGIC, the listing's key as one line (`Seen.key`, in listdir's order: read
# first, a beat whose listing differs reads no more), its record (`Seen.record`, the seal's
# sorted `g goals` line: an equal key lists the same entries at the same stats, so a beat
# that matches takes it from here and sorts no names), the JSON of the goals as one line,
# the goal items framed, then the digest of all that came before it (`world.digest`: xxh3:
# and 32 hex digits).
_DIGEST = 37
_FRAMED = 1024  # goal items framed per part written


class Side:
    """The goal side as recorded: `key` the key line of the listing it was recorded for
    (`Seen.key`), `record` that listing's (goals/'s stat text, `g goals` line), then per
    goal in id order its id, stamp, item digest and fence ("0"/"1"), the goal items
    ({"goal:<id>": digest}) and those items framed (`world.framed`)."""

    __slots__ = ("fenced", "held", "ids", "items", "key", "record", "section", "stamps")

    def __init__(
        self,
        key: str,
        record: tuple[str, str],
        ids: list[str],
        *,
        stamps: list[str],
        items: dict[str, str],
        fenced: str,
        section: bytes | memoryview,
    ) -> None:
        self.key = key
        self.record = record
        self.ids = ids
        self.stamps = stamps
        self.items = items
        self.fenced = fenced
        self.section = section
        self.held: tuple[Held, ...] = ()  # the goals made from it (workdir/goals.py `_known`)

    def matches(self, key: tuple[str, str] | None) -> bool:
        """Whether it was recorded for `key`, this beat's listing (`Seen.key`): goals/ as
        recorded, every goal at its recorded stat."""
        return key is not None and self.key == f"{key[0]} {key[1]}"

    def fenced_stamps(self) -> list[tuple[str, str]]:
        """(id, stamp) of the goals that open a `---` fence (the only ones that may be loops)."""
        out, ids, stamps, flags = [], self.ids, self.stamps, self.fenced
        i = flags.find("1")
        while i >= 0:
            out.append((ids[i], stamps[i]))
            i = flags.find("1", i + 1)
        return out


def load(path: Path) -> Side | None:
    """The recorded side if it is whole, whatever listing it was recorded for (`matches`
    says whether it is this beat's; a beat whose listing differs takes from it the goals
    whose own stat is the recorded one: workdir/goalsplice.py); None: no file, damaged."""
    data = _read(path)
    end = -1 if data is None else data.find(b"\n", len(MAGIC) + 1)
    if data is None or end < 0:
        return None
    key = data[len(MAGIC) + 1 : end].decode("utf-8", "surrogateescape")
    return _parse(data, end + 1, key)


def _parse(data: bytes, head: int, key: str) -> Side | None:
    """The side in `data` (the file's bytes), whose first `head` bytes are MAGIC and the
    key line `key` it was recorded for."""
    view = memoryview(data)
    if len(data) < _DIGEST or data[-_DIGEST:] != world.digest(view[:-_DIGEST]).encode():
        return None  # truncated, damaged, or replaced since the first read
    meta_start = data.find(b"\n", head) + 1
    meta_end = data.find(b"\n", meta_start)
    if meta_start <= 0 or meta_end < 0:
        return None
    seal_line = data[head : meta_start - 1].decode("utf-8", "surrogateescape")
    if not seal_line.startswith("g goals "):
        return None
    try:
        meta = jsonio.loads(view[meta_start:meta_end])
    except jsonio.JSONDecodeError:
        return None
    if not isinstance(meta, dict):
        return None
    ids, stamps, digests, fenced = (meta.get(k) for k in ("ids", "stamps", "digests", "fenced"))
    if not (
        isinstance(ids, list)
        and isinstance(stamps, list)
        and isinstance(digests, list)
        and isinstance(fenced, str)
        and len(ids) == len(stamps) == len(digests) == len(fenced)
        and set(map(type, ids)) | set(map(type, stamps)) | set(map(type, digests)) <= {str}
        and set(fenced) <= {"0", "1"}
    ):
        return None
    items = dict(zip(["goal:" + goal_id for goal_id in ids], digests, strict=True))
    return Side(
        key,
        (key.partition(" ")[0], seal_line),
        ids,
        stamps=stamps,
        items=items,
        fenced=fenced,
        section=bytes(view[meta_end + 1 : -_DIGEST]),  # a copy: the file's bytes go
    )


def _read(path: Path) -> bytes | None:
    """The file's bytes if it is a regular file under CAP that begins with MAGIC."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > CAP:
            return None
        data = os.read(fd, st.st_size + 1)  # one read: a regular file gives all of it
        return data if data.startswith(MAGIC + b"\n") else None  # another version
    except OSError:
        return None
    finally:
        os.close(fd)


def _record_line(record: tuple[str, str]) -> bytes:
    return f"{record[0]} {record[1]}".encode("utf-8", "surrogateescape")


def save(
    path: Path,
    key: tuple[str, str],
    record: tuple[str, str],
    found: Sequence[tuple[str, str | None]],
    *,
    digests: list[str],
    fenced: str,
    section: bytes | memoryview | None = None,
) -> None:
    """Record the goal side for `key` and its `record` (`Seen.key`, `Seen.record`): `found`
    the listing's (id, stamp) in id order, each goal's item digest and fence ("0"/"1") in
    the same order (the caller has checked
    that the world hashed each goal at its listed stamp). Written part by part, the digest
    last: at 10,000 goals no part is over ~0.6 MB (a full beat's memory peaks about then).
    `section`: the goal items already framed (workdir/goalsplice.py spliced them)."""
    update, result = world.digester()

    def parts() -> Iterator[bytes]:
        yield MAGIC + b"\n"
        yield _record_line(key) + b"\n"
        yield record[1].encode("utf-8", "surrogateescape") + b"\n"
        # Each list a part of its own: at 10,000 goals no part is over ~0.6 MB, none joined.
        yield b'{"digests":'
        yield jsonio.dumps(digests)
        yield b',"fenced":' + jsonio.dumps(fenced) + b',"ids":'
        yield jsonio.dumps([goal_id for goal_id, _ in found])
        yield b',"stamps":'
        yield jsonio.dumps([stamp for _, stamp in found])
        yield b"}\n"
        if section is not None:
            yield bytes(section)  # the spliced bytes themselves: no copy
            return
        for i in range(0, len(found), _FRAMED):
            chunk = zip(found[i : i + _FRAMED], digests[i : i + _FRAMED], strict=True)
            yield world.framed({f"goal:{goal_id}": d for (goal_id, _), d in chunk})

    def hashed() -> Iterator[bytes]:
        for part in parts():
            update(part)
            yield part
        yield result().encode()

    with contextlib.suppress(OSError):  # a cache: a beat that cannot write it goes on
        jsonio.atomic_write(path, hashed(), durable=False)
