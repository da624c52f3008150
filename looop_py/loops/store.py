"""Rounds and memory: the only module that reads or writes them.

    rounds       one live round, saved after every step   (rounds/<id>.json)
    rounds-done  a finished round, moved an hour after it ended (rounds/done/<id>.json)
    state/round-reports  each loop's latest round worth a decider's attention
    memory/<loop>.jsonl  each loop's state spine: one line per finished round
    memory       on a shared shelf, each loop's last rounds too (SharedMemory)

Rounds are records on the work dir's shelf (workdir/shelf.py): files on one
machine, keys every host shares on etcd, so any pulse host steps a round another
started (except while its worker runs on another host: loops/advance.py). A
loop's full memory stays on each host; its last rounds are shared for recall.

The pulse reads rounds on every beat (the sys-rounds probe, ADVANCE, claim
reaping), so the cheap reads here — `rows`, `probe`, `is_live`, `archive_done`
— parse raw JSON and import nothing from the engine; only `RoundFiles.load`
builds RoundState objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.errors import CorruptFile, UsageError
from looop_py.ids import check_segment, is_safe_segment
from looop_py.workdir import shelf as shelf_mod

if TYPE_CHECKING:
    from looop_py.engine.ports import MemoryEntry
    from looop_py.engine.rounds import RoundState
    from looop_py.workdir.context import WorkDir
    from looop_py.workdir.shelf import Shelf

DONE = "done"
LIVE, ARCHIVE = "rounds", "rounds-done"  # the shelf's kinds
REPORTS = "round-reports"  # among the shelf's `state` records
# Outcomes the decider hears about (once each): every way a round ends.
REPORTED = frozenset(
    {"reported", "proceeded", "failed", "blocked", "escalated", "budget-exhausted"}
)
DONE_KEEP_S = 3600.0  # a finished round stays live this long, then is archived
_DEDUPE_WINDOW = 20  # memory lines searched for an entry of the same round


# -- rounds as the engine sees them ------------------------------------------------------


@dataclass(frozen=True)
class RoundFiles:
    """Rounds on a shelf, each saved whole: the engine's RoundStore in a work dir."""

    shelf: Shelf

    def save(self, state: RoundState) -> None:
        record = state.to_dict()
        if self.shelf.shared:
            record["host"] = self.shelf.host  # where its worker, worktree and logs are
        shelf_mod.write_json(self.shelf, LIVE, check_segment(state.id, "round id"), record)

    def load(self, round_id: str) -> RoundState:
        data = shelf_mod.read_json(self.shelf, LIVE, check_segment(round_id, "round id"))
        if data is None:
            raise UsageError(f"no round {round_id!r}", "list rounds with `looop rounds --all`")
        return self._state(round_id, data)

    def _state(self, round_id: str, data: Any) -> RoundState:
        from looop_py.engine.rounds import RoundState  # the engine loads only when rounds run

        try:
            return RoundState.from_dict(data)
        except (AttributeError, KeyError, TypeError, ValueError, UsageError) as exc:
            raise CorruptFile(
                f"{self.shelf.where(LIVE, round_id)} is not a round this looop can read ({exc})",
                "move it aside; the loop will start a fresh round",
            ) from None

    def new_id(self, loop: str, now: float) -> str:
        from looop_py.engine.rounds import round_id_for  # as in load

        base = round_id_for(loop, now)
        taken = {*self.shelf.names(LIVE), *self.shelf.names(ARCHIVE)}
        rid, n = base, 1
        while rid in taken:
            n += 1
            rid = f"{base}-{n}"
        return rid

    def all(self) -> list[RoundState]:
        """Every readable live round, oldest first; unreadable ones are skipped."""
        found: list[RoundState] = []
        for name, data in shelf_mod.json_items(self.shelf, LIVE):  # one read of them all
            try:
                found.append(self._state(name, data))
            except CorruptFile:
                continue
        found.sort(key=lambda r: (r.started_at, r.id))
        return found

    def live(self, loop: str | None = None) -> list[RoundState]:
        return [r for r in self.all() if r.live and (loop is None or r.loop == loop)]


def rounds_of(wd: WorkDir) -> RoundFiles:
    """The work dir's rounds, on its shelf."""
    return RoundFiles(wd.shelf)


# -- cheap reads: raw JSON, no engine -----------------------------------------------------


@dataclass(frozen=True)
class RoundRow:
    """One round as `looop rounds`, `looop loops` and the sys-rounds probe show it."""

    id: str
    loop: str | None
    phase: str  # a Phase value, or "unreadable"
    outcome: str | None = None
    trigger: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    tokens: int = 0
    ask: str | None = None  # the approval it waits on, while it waits
    error: str | None = None
    host: str | None = None  # the host that last stepped it, when rounds are shared

    @property
    def live(self) -> bool:
        return self.phase != DONE

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "loop": self.loop,
            "phase": self.phase,
            "outcome": self.outcome,
            "trigger": self.trigger,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "tokens": self.tokens,
            "ask": self.ask,
            "error": self.error,
            **({"host": self.host} if self.host else {}),
        }


def _row(stem: str, data: Any) -> RoundRow:
    if not isinstance(data, dict):
        return RoundRow(stem, None, "unreadable")
    spec = data.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    phase = str(data.get("phase"))
    return RoundRow(
        id=str(data.get("id") or stem),
        loop=_text(data.get("loop")) or _text(spec.get("name")),
        phase=phase,
        outcome=_text(data.get("outcome")),
        trigger=_text(data.get("trigger")),
        started_at=jsonio.number(data.get("started_at")),
        ended_at=jsonio.number(data.get("ended_at")),
        tokens=sum(
            int(jsonio.number(data.get(key)) or 0)
            for key in ("input_tokens", "output_tokens", "unsplit_tokens")
        ),
        ask=_text(data.get("ask")) if phase == "awaiting-approval" else None,
        error=_text(data.get("error")),
        host=_text(data.get("host")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def rows(shelf: Shelf, *, include_done: bool) -> list[RoundRow]:
    """Live rounds (and with include_done the archived ones too), oldest first.

    An unreadable record is a row with phase "unreadable", so it is seen, not hidden.
    """
    found: list[RoundRow] = []
    for kind in (LIVE, ARCHIVE) if include_done else (LIVE,):
        found += [row for row in kind_rows(shelf, kind) if row.live or include_done]
    found.sort(key=lambda r: (r.started_at or 0, r.id))
    return found


def kind_rows(shelf: Shelf, kind: str) -> list[RoundRow]:
    """Every round of one kind (LIVE: live and recently done; ARCHIVE), by name."""
    return [_row(name, data) for name, data in shelf_mod.json_items(shelf, kind)]


def probe(shelf: Shelf) -> dict[str, Any]:
    """The sys-rounds snapshot. Rounds cost no judgment: the engine advances them itself, so
    the signal moves only when someone must act — a round waits for a human, a record cannot
    be read, or a loop has a new report (its latest reported, failed, escalated or
    over-budget round). Every live round's phase, tokens and ask are in detail."""
    waiting: list[str] = []
    unreadable: list[str] = []
    detail: dict[str, Any] = {}
    for row in sorted(rows(shelf, include_done=False), key=lambda r: r.id):
        if row.phase == "unreadable":
            unreadable.append(row.id)
            continue
        if row.phase == "awaiting-approval":
            waiting.append(row.id)
        detail[row.id] = {
            "loop": row.loop,
            "phase": row.phase,
            "started_at": row.started_at,
            "tokens": row.tokens,
            "ask": row.ask,
        }
    signal: dict[str, Any] = {"awaiting-approval": waiting, "reports": reports(shelf)}
    if unreadable:
        signal["unreadable"] = unreadable
    return {"signal": signal, "detail": detail}


def reports(shelf: Shelf) -> dict[str, str]:
    """{loop: id of its latest round with something to report}."""
    try:
        data = shelf_mod.read_json(shelf, "state", REPORTS, {})
    except (CorruptFile, OSError):
        return {}
    loops = data.get("loops") if isinstance(data, dict) else None
    if not isinstance(loops, dict):
        return {}
    return {str(k): str(v) for k, v in sorted(loops.items()) if isinstance(v, str)}


def note_report(shelf: Shelf, loop: str, round_id: str) -> None:
    """Record that `round_id` is `loop`'s latest round worth a decider's attention."""
    loops = reports(shelf)
    if loops.get(loop) != round_id:
        shelf_mod.write_json(shelf, "state", REPORTS, {"v": 1, "loops": {**loops, loop: round_id}})


def is_live(shelf: Shelf, round_id: str) -> bool:
    """Is the round not yet done? Unreadable counts as live (fail closed)."""
    if not is_safe_segment(round_id):
        return False
    try:
        data = shelf_mod.read_json(shelf, LIVE, round_id)
    except (CorruptFile, OSError):
        return True
    return isinstance(data, dict) and data.get("phase") != DONE


def host_of(shelf: Shelf, round_id: str) -> str | None:
    """The host that last stepped a live round, as its record says (shared shelves only)."""
    try:
        data = shelf_mod.read_json(shelf, LIVE, round_id)
    except (CorruptFile, OSError):
        return None
    host = data.get("host") if isinstance(data, dict) else None
    return host if isinstance(host, str) else None


def archive_done(shelf: Shelf, now: float, *, keep_s: float = DONE_KEEP_S) -> list[str]:
    """Archive rounds that ended over `keep_s` ago; returns their ids.

    Each beat then reads only live rounds (and the last hour's).
    """
    return [
        name for name in to_archive(shelf, now, keep_s=keep_s) if shelf.move(LIVE, name, ARCHIVE)
    ]


def to_archive(shelf: Shelf, now: float, *, keep_s: float = DONE_KEEP_S) -> list[str]:
    """The live rounds that ended over `keep_s` ago (what `archive_done` moves)."""
    due: list[str] = []
    for name, data in shelf_mod.json_items(shelf, LIVE):
        if not isinstance(data, dict) or data.get("phase") != DONE:
            continue
        ended = jsonio.number(data.get("ended_at"))
        if ended is not None and now - ended > keep_s:
            due.append(name)
    return due


# -- memory ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonlMemory:
    """memory/<loop>.jsonl: the engine's Memory in a work dir.

    Recall by loop reads only the file's tail, so a loop that has run for years
    recalls as fast as a new one; recall by tag reads the whole file (kept small:
    it rotates at 5 MiB and expired entries are pruned). A line is appended with
    one write(2); a round recorded twice (it crashed between recording and saving
    its state) keeps one line. Recording prunes the loop's expired entries (one
    rewrite, only when there are some): a loop has one live round at a time and
    only this host writes its file, so no append races the rewrite.
    """

    directory: Path
    clock: Callable[[], float] = time.time

    def path(self, loop: str) -> Path:
        return self.directory / f"{check_segment(loop, 'loop name')}.jsonl"

    def recall(self, loop: str | None, k: int, *, tag: str | None = None) -> list[MemoryEntry]:
        """The latest `k` unexpired entries of a loop, oldest first; with `tag`, only
        those carrying it; `loop=None` (with a tag): every loop's, by time."""
        if k <= 0:
            return []
        now = self.clock()
        if loop is None:
            if tag is None:
                raise UsageError("recall every loop's memory by a tag (tag=…)")
            paths = sorted(self.directory.glob("*.jsonl")) if self.directory.is_dir() else []
            pool = [e for p in paths for e in _entries(_all_lines(p))]
            pool.sort(key=lambda e: e.created)
        elif tag is None:
            pool = _entries(jsonio.tail_lines(self.path(loop), k))
        else:
            pool = _entries(_all_lines(self.path(loop)))
        found = [e for e in pool if not e.is_expired(now) and (tag is None or tag in e.tags)]
        return found[-k:]

    def record(self, loop: str, entry: MemoryEntry) -> None:
        path = self.path(loop)
        if entry.round_id is not None:
            recent = jsonio.iter_json_lines(jsonio.tail_lines(path, _DEDUPE_WINDOW))
            if any(isinstance(d, dict) and d.get("round") == entry.round_id for d in recent):
                return
        self.directory.mkdir(parents=True, exist_ok=True)
        if _head_expired(path, entry.created):  # the oldest line first: cheap when none is
            self.prune(loop, entry.created)
        jsonio.append_line(path, entry.to_dict())

    def prune(self, loop: str, now: float) -> int:
        """Drop the loop's entries expired at `now` (and lines a crash tore); how many."""
        path = self.path(loop)
        lines = _all_lines(path)
        kept = [
            line
            for line, d in zip(lines, _parsed(lines), strict=True)
            if d is not None and not _expired(d, now)
        ]
        if len(kept) == len(lines):
            return 0
        jsonio.atomic_write(path, b"".join(line + b"\n" for line in kept), durable=False)
        return len(lines) - len(kept)


def _head_expired(path: Path, now: float) -> bool:
    """Is the file's first entry expired? Entries are appended oldest first, so this is
    the check for "anything to prune" that reads one line (an entry with a longer
    ttl ahead of shorter ones delays their pruning, never their expiry: recall
    filters by time)."""
    try:
        with path.open("rb") as f:
            first = f.readline(1 << 20)
    except OSError:
        return False
    (d,) = _parsed([first]) if first.strip() else [None]
    return d is None or _expired(d, now)  # a torn first line is pruned too


def _all_lines(path: Path) -> list[bytes]:
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return [line for line in data.split(b"\n") if line.strip()]


def _parsed(lines: list[bytes]) -> list[dict[str, Any] | None]:
    out: list[dict[str, Any] | None] = []
    for line in lines:
        try:
            d = jsonio.loads(line)
        except jsonio.JSONDecodeError:
            d = None
        out.append(d if isinstance(d, dict) else None)
    return out


def _entries(lines: list[bytes]) -> list[MemoryEntry]:
    from looop_py.engine.ports import MemoryEntry  # as in load

    return [MemoryEntry.from_dict(d) for d in _parsed(lines) if d is not None]


def _expired(d: dict[str, Any], now: float) -> bool:
    expires = jsonio.number(d.get("expires"))
    return expires is not None and now >= expires


SHARED_KEEP = 20  # entries of a loop's shared memory record (recall reads engine RECALL_K)
SHARED_CONTENT_CAP = 8 * 1024  # characters of one entry's content there: etcd values are small


@dataclass(frozen=True)
class SharedMemory:
    """A loop's recent memory as one record on a shared shelf (`memory/<loop>`), so a round
    on any host recalls what rounds on every host learned.

    It keeps the last SHARED_KEEP entries, each cut to SHARED_CONTENT_CAP characters; the
    whole history is also appended to the recording host's memory/<loop>.jsonl.
    """

    shelf: Shelf
    local: JsonlMemory

    def _entries(self, loop: str) -> list[dict[str, Any]]:
        try:
            data = shelf_mod.read_json(self.shelf, "memory", check_segment(loop, "loop name"), [])
        except CorruptFile:
            return []  # a damaged record is rebuilt from the next round on
        return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []

    def recall(self, loop: str | None, k: int, *, tag: str | None = None) -> list[MemoryEntry]:
        """As JsonlMemory.recall, from the shared record (a tag across loops: this
        host's files, which hold every entry it recorded)."""
        from looop_py.engine.ports import MemoryEntry  # as in load

        if loop is None or k <= 0:
            return self.local.recall(loop, k, tag=tag)
        now = self.local.clock()
        found = [MemoryEntry.from_dict(d) for d in self._entries(loop)]
        return [e for e in found if not e.is_expired(now) and (tag is None or tag in e.tags)][-k:]

    def record(self, loop: str, entry: MemoryEntry) -> None:
        entries = [d for d in self._entries(loop) if not _expired(d, entry.created)]
        if entry.round_id is not None and any(d.get("round") == entry.round_id for d in entries):
            return  # recorded already, maybe on another host: a retried round
        self.local.record(loop, entry)
        line = entry.to_dict()
        line["content"] = str(line["content"])[:SHARED_CONTENT_CAP]
        line["host"] = self.shelf.host
        kept = [*entries, line][-SHARED_KEEP:]
        shelf_mod.write_json(self.shelf, "memory", loop, kept)


def memory_of(wd: WorkDir) -> JsonlMemory | SharedMemory:
    """The work dir's loop memory: its files, or (shared shelf) one record per loop too."""
    local = JsonlMemory(wd.paths.memory, wd.clock)
    box = wd.shelf
    return SharedMemory(box, local) if box.shared else local
