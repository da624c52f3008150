"""Records that do not fit are moved aside to corrupt/, with a journal line and an event.

A record is a file looop cannot rebuild from anything else: a round
(rounds/), a worker session (sessions/<id>/), a claim (claims/), an ask or its
answer (asks/, answers/). One that is not valid JSON, not a regular file, or
not the shape its owner reads would otherwise be skipped by every reader
forever (or worse, half-read). The beat checks them before REAP and moves each
misfit to `corrupt/<where it was>.<time>`, so a human can look at it, and the
beat goes on without it. Caches under state/ are never moved: their owners
rebuild them when they do not fit.

A record that fit is not read again while its file is unchanged: state/records-checked.json
keeps the stat (mtime, ctime, size, inode) of each one that fit, so a beat reads only what
was written since, never the whole history (a cache: unreadable, it is rebuilt).
A folder of history (rounds/done/, answers/, and the answered asks in asks/) is not even
listed while its own stat is the one it had when all its records fit: a record comes or
goes only by a rename or a delete, which moves the folder's stat. A record damaged in
place there is caught by the daily look record by record (`SWEEP_S`); live rounds,
claims, sessions and pending asks are stat'ed on every beat.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.errors import CorruptFile, LooopError
from looop_py.ids import is_safe_segment
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir


def corrupt_dir(paths: Paths) -> Path:
    return paths.root / "corrupt"


Stamp = tuple[object, ...]
INDEX_NAME = "records-checked.json"
INDEX_V = 2  # v2: a record's stamp is one string (a flat file: no walk for nesting on read)
SWEEP_S = 86400.0  # a folder of history is still looked at record by record once a day
SETTLE_S = 2.0  # a folder changed this recently may change again within its mtime's tick


class Checked:
    """The records that fit when last read, by path relative to the work dir, with their
    stamps; `seen` collects this run's, so records that went drop out when it is saved."""

    __slots__ = ("by_dir", "dirs", "dirs_was", "now", "path", "root", "seen", "was")

    def __init__(self, paths: Paths, now: float) -> None:
        self.root = paths.root
        self.path = paths.state / INDEX_NAME
        self.now = now
        self.seen: dict[str, str] = {}
        self.dirs: dict[str, list[object]] = {}
        self.by_dir: dict[str, list[tuple[str, str]]] | None = (
            None  # folder → (key, stem)  # folder → [mtime, ctime, inode, looked at]
        )
        try:
            data = jsonio.read_json(self.path, {})
        except LooopError:
            data = {}
        ok = isinstance(data, dict) and data.get("v") == INDEX_V
        fit, dirs = (data.get("fit"), data.get("dirs")) if ok else (None, None)
        self.was: dict[str, Any] = fit if isinstance(fit, dict) else {}
        self.dirs_was: dict[str, Any] = dirs if isinstance(dirs, dict) else {}

    def folder(self, directory: Path) -> tuple[bool, list[int] | None]:
        """(unchanged, stamp): is `directory`'s stat the one it had when all its records
        last fit, looked at record by record under `SWEEP_S` ago? Its stamp either way."""
        try:
            st = os.stat(directory)
        except OSError:
            return False, None
        stamp = [st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        was = self.dirs_was.get(str(directory.relative_to(self.root)))
        if not (isinstance(was, list) and len(was) == 4 and was[:3] == stamp):
            return False, stamp
        looked = jsonio.number(was[3])
        return looked is not None and 0 <= self.now - looked < SWEEP_S, stamp

    def carry(self, directory: Path, stems: set[str] | None = None) -> set[str]:
        """Keep the index's records of an unchanged `directory` (only `stems`, if given)
        without a look; the stems of all it holds."""
        rel = str(directory.relative_to(self.root))
        if rel in self.dirs_was:
            self.dirs[rel] = self.dirs_was[rel]
        if self.by_dir is None:  # one pass over the index, however many folders carry
            self.by_dir = {}
            for key in self.was:
                folder, _, name = key.rpartition("/")
                self.by_dir.setdefault(folder, []).append((key, name.removesuffix(".json")))
        held: set[str] = set()
        for key, stem in self.by_dir.get(rel, ()):
            held.add(stem)
            if stems is None or stem in stems:
                self.seen[key] = self.was[key]
        return held

    def folder_fits(self, directory: Path, stamp: list[int] | None) -> None:
        """Every record of `directory` fit, as it was when its `stamp` was taken (before
        they were listed); not kept while the folder changed too lately to trust its tick."""
        if stamp is not None and self.now - stamp[0] / 1e9 >= SETTLE_S:
            self.dirs[str(directory.relative_to(self.root))] = [*stamp, self.now]

    def known(self, path: Path, stamp: Stamp) -> bool:
        """Did `path` fit when it was last read, and is it unchanged since?"""
        rel, text = str(path.relative_to(self.root)), _text(stamp)
        if self.was.get(rel) == text:
            self.seen[rel] = text
            return True
        return False

    def fits(self, path: Path, stamp: Stamp) -> None:
        self.seen[str(path.relative_to(self.root))] = _text(stamp)

    def save(self) -> None:
        if self.seen != self.was or self.dirs != self.dirs_was:
            record = {"v": INDEX_V, "fit": self.seen, "dirs": self.dirs}
            with contextlib.suppress(OSError):
                jsonio.write_json(self.path, record, durable=False)


def check_records(wd: WorkDir, now: float) -> list[dict[str, Any]]:
    """Move every misfit record aside; one event dict (`record_set_aside`) for each."""
    events: list[dict[str, Any]] = []
    checked = Checked(wd.paths, now)
    for path, why in list(misfits(wd.paths, now, checked)):
        moved = set_aside(wd, path, why, now)
        if moved is not None:
            events.append(moved)
    checked.save()
    return events


def misfits(paths: Paths, now: float, checked: Checked | None = None) -> Iterator[tuple[Path, str]]:
    """(path, why) of each record that does not fit; a session is its whole directory.
    With `checked`, a record unchanged since it last fit is not read again."""
    index = checked if checked is not None else Checked(paths, now)
    yield from _rounds(paths, index)
    yield from _sessions(paths, index)
    yield from _claims(paths, index)
    yield from _asks(paths, index)


def _stamp(path: Path) -> Stamp | None:
    try:
        return jsonio.file_stamp(path)
    except OSError:
        return None


def _text(stamp: Stamp) -> str:
    return " ".join(map(str, stamp))


def _unchanged(checked: Checked, path: Path) -> tuple[bool, Stamp | None]:
    stamp = _stamp(path)
    return stamp is not None and checked.known(path, stamp), stamp


def set_aside(wd: WorkDir, path: Path, why: str, now: float) -> dict[str, Any] | None:
    """Move `path` (a file or a session directory) under corrupt/; None if it vanished."""
    rel = path.relative_to(wd.paths.root)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    dest = corrupt_dir(wd.paths) / rel.parent / f"{rel.name}.{stamp}"
    n = 1
    while dest.exists():
        n += 1
        dest = dest.with_name(f"{rel.name}.{stamp}-{n}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(path, dest)
    except FileNotFoundError:
        return None
    where = str(dest.relative_to(wd.paths.root))
    journal.write(wd, f"⚠ moved {rel} aside to {where}: {why}; the beat goes on", now)
    return {"event": "record_set_aside", "path": str(rel), "to": where, "why": why}


def _why_json(path: Path) -> tuple[Any, str | None]:
    """(parsed value, None) or (None, why it cannot be read). A vanished file is (None, None)."""
    try:
        return jsonio.read_json(path), None
    except CorruptFile as exc:
        return None, exc.message.replace(f"{path} ", "", 1)


def _json_records(directory: Path) -> Iterator[Path]:
    try:
        with os.scandir(directory) as it:
            names = sorted(e.name for e in it if not e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        stem = name.removesuffix(".json")
        if stem != name and is_safe_segment(stem):
            yield directory / name


def _rounds(paths: Paths, checked: Checked) -> Iterator[tuple[Path, str]]:
    yield from _each(checked, list(_json_records(paths.rounds)), _round_misfit)
    yield from _history(checked, paths.rounds / "done", _round_misfit)


def _round_misfit(path: Path, data: Any) -> str | None:
    from looop_py.engine.rounds import RoundState  # only when a round changed

    try:
        RoundState.from_dict(data)
    except (AttributeError, KeyError, TypeError, ValueError, LooopError) as exc:
        return f"not a round this looop can read ({exc})"
    return None


Fit = Callable[[Path, Any], "str | None"]


def _each(checked: Checked, files: list[Path], why_not: Fit) -> Iterator[tuple[Path, str]]:
    """(path, why) of each of `files` that changed since it fit and does not fit now."""
    for path, stamp in _changed(checked, files):
        data, why = _why_json(path)
        if why is None and data is not None:
            why = why_not(path, data)
        if why is not None:
            yield path, why
        elif data is not None:
            checked.fits(path, stamp)


def _history(checked: Checked, folder: Path, why_not: Fit) -> Iterator[tuple[Path, str]]:
    """`_each` over a folder of history, skipped whole while its stat says it is unchanged."""
    same, stamp = checked.folder(folder)
    if same:
        checked.carry(folder)
        return
    bad = False
    for misfit in _each(checked, list(_json_records(folder)), why_not):
        bad = True
        yield misfit
    if not bad:
        checked.folder_fits(folder, stamp)


def _changed(checked: Checked, files: list[Path]) -> Iterator[tuple[Path, Stamp]]:
    """The files not known to fit as they are, each with the stamp it had before its read
    (a write after the stat makes the stamp stale, so the next beat reads it again)."""
    for path in files:
        same, stamp = _unchanged(checked, path)
        if not same and stamp is not None:
            yield path, stamp


def _sessions(paths: Paths, checked: Checked) -> Iterator[tuple[Path, str]]:
    try:
        with os.scandir(paths.sessions) as it:
            dirs = sorted(e.path for e in it if is_safe_segment(e.name) and e.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return
    if not dirs:
        return
    from looop_py.workers import records  # only when there are sessions (reaping loads it too)

    for d in dirs:
        files = [Path(d) / name for name in records.CHECKED]
        stamp: Stamp = tuple(_stamp(f) for f in files)
        if checked.known(Path(d), stamp):
            continue
        why = records.misfit(Path(d))
        if why is not None:
            yield Path(d), why
        else:
            checked.fits(Path(d), stamp)


def _claims(paths: Paths, checked: Checked) -> Iterator[tuple[Path, str]]:
    for path, stamp in _changed(checked, list(_json_records(paths.claims))):
        data, why = _why_json(path)
        if why is None and data is not None and not isinstance(data, dict):
            why = "not a claim: a JSON object was expected"
        if why is not None:
            yield path, why
        elif data is not None:
            checked.fits(path, stamp)


def _asks(paths: Paths, checked: Checked) -> Iterator[tuple[Path, str]]:
    """Answers are history; so are the asks they answer, while neither folder changed: then
    only the pending asks (the ones a beat acts on) are stat'ed."""
    answers_same = checked.folder(paths.answers)[0]
    yield from _history(checked, paths.answers, _answer_misfit)
    same = checked.folder(paths.asks)[0]
    if not (same and answers_same):
        yield from _history(checked, paths.asks, _ask_misfit)
        return
    answered = checked.carry(paths.answers)
    held = checked.carry(paths.asks, stems=answered)
    pending = [paths.asks / f"{stem}.json" for stem in sorted(held - answered)]
    bad = False
    for misfit in _each(checked, pending, _ask_misfit):
        bad = True
        yield misfit
    if bad:
        checked.dirs.pop(str(paths.asks.relative_to(paths.root)), None)


def _answer_misfit(path: Path, data: Any) -> str | None:
    if isinstance(data, dict) and isinstance(data.get("answer"), str):
        return None
    return "not an answer: an object with a string `answer` was expected"


def _ask_misfit(path: Path, data: Any) -> str | None:
    stem = path.stem
    if not isinstance(data, dict):
        return "not an ask: a JSON object was expected"
    if data.get("id") != stem:
        return f"not an ask: its id is {data.get('id')!r}, its file name says {stem!r}"
    if not isinstance(data.get("prompt"), str):
        return "not an ask: it has no string `prompt`"
    created = data.get("created_at")
    if isinstance(created, bool) or not isinstance(created, int | float):
        return "not an ask: it has no numeric `created_at`"
    from looop_py.asks.mailbox import Ask  # only when there are asks (sys-asks loads it too)

    with contextlib.suppress(KeyError, TypeError, ValueError):
        Ask.from_json(data)
        return None
    return "not an ask this looop can read"
