"""rounds/ and memory/: the only module that reads or writes them.

    rounds/<id>.json        one live round, saved after every step
    rounds/done/<id>.json   a finished round, moved here an hour after it ended
    memory/<loop>.jsonl     each loop's state spine: one line per finished round

The pulse reads rounds on every beat (the sys-rounds probe, ADVANCE, claim
reaping), so the cheap reads here — `rows`, `probe`, `is_live`, `archive_done`
— parse raw JSON and import nothing from the engine; only `RoundFiles.load`
builds RoundState objects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import CorruptFile, UsageError
from looop_py.ids import check_segment, is_safe_segment

# typing is not imported at run time: the pulse reads rounds every beat.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.engine.ports import MemoryEntry
    from looop_py.engine.rounds import RoundState

DONE = "done"
# Outcomes a human or the decider should hear about; a round that simply proceeded does not.
REPORTED = frozenset({"reported", "failed", "escalated", "budget-exhausted"})
DONE_KEEP_S = 3600.0  # a finished round stays in rounds/ this long, then moves to rounds/done/
_DEDUPE_WINDOW = 20  # memory lines searched for an entry of the same round


# -- rounds as the engine sees them ------------------------------------------------------


@dataclass(frozen=True)
class RoundFiles:
    """rounds/<id>.json, each written atomically: the engine's RoundStore in a work dir."""

    directory: Path

    def path(self, round_id: str) -> Path:
        return self.directory / f"{check_segment(round_id, 'round id')}.json"

    def save(self, state: RoundState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        jsonio.write_json(self.path(state.id), state.to_dict())

    def load(self, round_id: str) -> RoundState:
        from looop_py.engine.rounds import RoundState  # the engine loads only when rounds run

        data = jsonio.read_json(self.path(round_id))
        if data is None:
            raise UsageError(f"no round {round_id!r}", "list rounds with `looop rounds --all`")
        try:
            return RoundState.from_dict(data)
        except (AttributeError, KeyError, TypeError, ValueError, UsageError) as exc:
            raise CorruptFile(
                f"{self.path(round_id)} is not a round this looop can read ({exc})",
                "move it aside; the loop will start a fresh round",
            ) from None

    def new_id(self, loop: str, now: float) -> str:
        from looop_py.engine.rounds import round_id_for  # as in load

        base = round_id_for(loop, now)
        rid, n = base, 1
        while self.path(rid).exists():
            n += 1
            rid = f"{base}-{n}"
        return rid

    def all(self) -> list[RoundState]:
        """Every readable round, oldest first; unreadable files are skipped."""
        found: list[RoundState] = []
        for stem, _path in _round_files(self.directory):
            try:
                found.append(self.load(stem))
            except (UsageError, CorruptFile, OSError):
                continue
        found.sort(key=lambda r: (r.started_at, r.id))
        return found

    def live(self, loop: str | None = None) -> list[RoundState]:
        return [r for r in self.all() if r.live and (loop is None or r.loop == loop)]


def _round_files(directory: Path) -> list[tuple[str, Path]]:
    try:
        with os.scandir(directory) as it:
            entries = [(e.name, e.path) for e in it if e.is_file()]
    except FileNotFoundError:
        return []
    found = []
    for name, path in sorted(entries):
        stem = name.removesuffix(".json")
        if stem != name and is_safe_segment(stem):
            found.append((stem, Path(path)))
    return found


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
        started_at=_num(data.get("started_at")),
        ended_at=_num(data.get("ended_at")),
        tokens=int(_num(data.get("input_tokens")) or 0) + int(_num(data.get("output_tokens")) or 0),
        ask=_text(data.get("ask")) if phase == "awaiting-approval" else None,
        error=_text(data.get("error")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def rows(rounds_dir: Path, *, include_done: bool) -> list[RoundRow]:
    """Live rounds (and with include_done the finished ones too), oldest first.

    An unreadable file is a row with phase "unreadable", so it is seen, not hidden.
    """
    dirs = [rounds_dir] + ([rounds_dir / "done"] if include_done else [])
    found: list[RoundRow] = []
    for d in dirs:
        for stem, path in _round_files(d):
            try:
                row = _row(stem, jsonio.read_json(path))
            except (CorruptFile, OSError):
                row = RoundRow(stem, None, "unreadable")
            if row.live or include_done:
                found.append(row)
    found.sort(key=lambda r: (r.started_at or 0, r.id))
    return found


def probe(rounds_dir: Path, reports_path: Path) -> dict[str, Any]:
    """The sys-rounds snapshot. Rounds cost no judgment: the engine advances them itself, so
    the signal moves only when someone must act — a round waits for a human, a file cannot
    be read, or a loop has a new report (its latest reported, failed, escalated or
    over-budget round). Every live round's phase, tokens and ask are in detail."""
    waiting: list[str] = []
    unreadable: list[str] = []
    detail: dict[str, Any] = {}
    for row in sorted(rows(rounds_dir, include_done=False), key=lambda r: r.id):
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
    signal: dict[str, Any] = {"awaiting-approval": waiting, "reports": reports(reports_path)}
    if unreadable:
        signal["unreadable"] = unreadable
    return {"signal": signal, "detail": detail}


def reports(reports_path: Path) -> dict[str, str]:
    """{loop: id of its latest round with something to report}."""
    try:
        data = jsonio.read_json(reports_path, {})
    except (CorruptFile, OSError):
        return {}
    loops = data.get("loops") if isinstance(data, dict) else None
    if not isinstance(loops, dict):
        return {}
    return {str(k): str(v) for k, v in sorted(loops.items()) if isinstance(v, str)}


def note_report(reports_path: Path, loop: str, round_id: str) -> None:
    """Record that `round_id` is `loop`'s latest round worth a decider's attention."""
    loops = reports(reports_path)
    if loops.get(loop) != round_id:
        jsonio.write_json(reports_path, {"v": 1, "loops": {**loops, loop: round_id}})


def is_live(rounds_dir: Path, round_id: str) -> bool:
    """Is rounds/<id>.json a round not yet done? Unreadable counts as live (fail closed)."""
    if not is_safe_segment(round_id):
        return False
    try:
        data = jsonio.read_json(rounds_dir / f"{round_id}.json")
    except (CorruptFile, OSError):
        return True
    return isinstance(data, dict) and data.get("phase") != DONE


def archive_done(rounds_dir: Path, now: float, *, keep_s: float = DONE_KEEP_S) -> list[str]:
    """Move rounds that ended over `keep_s` ago to rounds/done/; returns their ids.

    Each beat then reads only live rounds (and the last hour's).
    """
    moved: list[str] = []
    for stem, path in _round_files(rounds_dir):
        try:
            data = jsonio.read_json(path)
        except (CorruptFile, OSError):
            continue
        if not isinstance(data, dict) or data.get("phase") != DONE:
            continue
        ended = _num(data.get("ended_at"))
        if ended is not None and now - ended > keep_s:
            (rounds_dir / "done").mkdir(exist_ok=True)
            os.replace(path, rounds_dir / "done" / path.name)
            moved.append(stem)
    return moved


# -- memory ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JsonlMemory:
    """memory/<loop>.jsonl: the engine's Memory in a work dir.

    Recall reads only the file's tail, so a loop that has run for years recalls
    as fast as a new one. A line is appended with one write(2); a round recorded
    twice (it crashed between recording and saving its state) keeps one line.
    """

    directory: Path

    def path(self, loop: str) -> Path:
        return self.directory / f"{check_segment(loop, 'loop name')}.jsonl"

    def recall(self, loop: str, k: int) -> list[MemoryEntry]:
        from looop_py.engine.ports import MemoryEntry  # as in load

        lines = jsonio.tail_lines(self.path(loop), k)
        return [
            MemoryEntry.from_dict(d) for d in jsonio.iter_json_lines(lines) if isinstance(d, dict)
        ]

    def record(self, loop: str, entry: MemoryEntry) -> None:
        path = self.path(loop)
        if entry.round_id is not None:
            recent = jsonio.iter_json_lines(jsonio.tail_lines(path, _DEDUPE_WINDOW))
            if any(isinstance(d, dict) and d.get("round") == entry.round_id for d in recent):
                return
        self.directory.mkdir(parents=True, exist_ok=True)
        jsonio.append_line(path, entry.to_dict())
