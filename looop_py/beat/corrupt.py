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
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
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


class Checked:
    """The records that fit when last read, by path relative to the work dir, with their
    stamps; `seen` collects this run's, so records that went drop out when it is saved."""

    __slots__ = ("path", "root", "seen", "was")

    def __init__(self, paths: Paths) -> None:
        self.root = paths.root
        self.path = paths.state / INDEX_NAME
        self.seen: dict[str, list[object]] = {}
        try:
            data = jsonio.read_json(self.path, {})
        except LooopError:
            data = {}
        fit = data.get("fit") if isinstance(data, dict) and data.get("v") == 1 else None
        self.was: dict[str, Any] = fit if isinstance(fit, dict) else {}

    def known(self, path: Path, stamp: Stamp) -> bool:
        """Did `path` fit when it was last read, and is it unchanged since?"""
        rel = str(path.relative_to(self.root))
        if self.was.get(rel) == list(stamp):
            self.seen[rel] = list(stamp)
            return True
        return False

    def fits(self, path: Path, stamp: Stamp) -> None:
        self.seen[str(path.relative_to(self.root))] = list(stamp)

    def save(self) -> None:
        if self.seen != self.was:
            with contextlib.suppress(OSError):
                jsonio.write_json(self.path, {"v": 1, "fit": self.seen}, durable=False)


def check_records(wd: WorkDir, now: float) -> list[dict[str, Any]]:
    """Move every misfit record aside; one event dict (`record_set_aside`) for each."""
    events: list[dict[str, Any]] = []
    checked = Checked(wd.paths)
    for path, why in list(misfits(wd.paths, checked)):
        moved = set_aside(wd, path, why, now)
        if moved is not None:
            events.append(moved)
    checked.save()
    return events


def misfits(paths: Paths, checked: Checked | None = None) -> Iterator[tuple[Path, str]]:
    """(path, why) of each record that does not fit; a session is its whole directory.
    With `checked`, a record unchanged since it last fit is not read again."""
    index = checked if checked is not None else Checked(paths)
    yield from _rounds(paths, index)
    yield from _sessions(paths, index)
    yield from _claims(paths, index)
    yield from _asks(paths, index)


def _stamp(path: Path) -> Stamp | None:
    try:
        return jsonio.file_stamp(path)
    except OSError:
        return None


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
    files = [*_json_records(paths.rounds), *_json_records(paths.rounds / "done")]
    for path, stamp in _changed(checked, files):
        from looop_py.engine.rounds import RoundState  # only when a round changed

        data, why = _why_json(path)
        if why is None and data is not None:
            try:
                RoundState.from_dict(data)
            except (AttributeError, KeyError, TypeError, ValueError, LooopError) as exc:
                why = f"not a round this looop can read ({exc})"
        if why is not None:
            yield path, why
        elif data is not None:
            checked.fits(path, stamp)


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
    for path, stamp in _changed(checked, list(_json_records(paths.asks))):
        data, why = _why_json(path)
        if why is None and data is not None:
            why = _ask_misfit(path.stem, data)
        if why is not None:
            yield path, why
        elif data is not None:
            checked.fits(path, stamp)
    for path, stamp in _changed(checked, list(_json_records(paths.answers))):
        data, why = _why_json(path)
        if (
            why is None
            and data is not None
            and not (isinstance(data, dict) and isinstance(data.get("answer"), str))
        ):
            why = "not an answer: an object with a string `answer` was expected"
        if why is not None:
            yield path, why
        elif data is not None:
            checked.fits(path, stamp)


def _ask_misfit(stem: str, data: Any) -> str | None:
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
