"""The shelf: where the loop's shared records live — on this disk, or on etcd for every host.

A record is a small JSON value with a kind and a safe name. With `[coordination]
backend = "files"` (the default) each kind is a directory of the work dir, as it
always was; with a shared backend (etcd) the records are keys under the prefix, so
any pulse host can continue another's round and answer its asks:

    kind          files                    what
    asks          asks/<id>.json           questions and approvals (asks/mailbox.py)
    answers       answers/<id>.json        their answers
    approved      state/approved/<id>      approvals still to be carried out (moves/approvals)
    forged        state/forged/<id>        intents refused as forged approvals (moves/approvals)
    rounds        rounds/<id>.json         live loop rounds (loops/store.py)
    rounds-done   rounds/done/<id>.json    finished rounds, archived after an hour
    timers        state/schedules/<n>      the decider's write_schedule timers (moves/timers)
    state         state/<name>.json        loop-schedule, round-reports, spend, decides,
                                           backoff, flap, goal-activity
    memory        (shared shelves only)    each loop's last rounds, for recall on any host

Logs, worktrees, sessions and reports stay on the host that made them, and so
does each loop's full memory/<loop>.jsonl.

Writes are whole records: `put` replaces, `create` writes only if absent (two
writers never both create an ask or both answer one), `move` archives, `swap`
replaces only what the writer read (the spend ledger's read-modify-write). Inside
`fenced(claim, token)` — a beat on a shared backend, under its pulse token —
every write is also conditional on that token still being current, and raises
FenceLost when it is not: a paused or partitioned ex-leader writes nothing.

The door that opens a work dir picks the backend looop.toml names (coord/choose.py
`open_workdir`) and never falls back to files; everything below reads `wd.shelf`.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import CorruptFile, UsageError
from looop_py.ids import check_segment, is_safe_segment
from looop_py.workdir.paths import Paths

# typing is not imported at run time: a worker's supervisor loads this at every start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from typing import Any, Protocol

    class Shelf(Protocol):
        backend: str
        shared: bool  # records are seen by every host on the backend
        host: str

        def where(self, kind: str, name: str) -> str: ...

        def get(self, kind: str, name: str) -> bytes | None: ...

        def names(self, kind: str) -> list[str]: ...

        def items(self, kind: str) -> list[tuple[str, bytes | None]]: ...

        def empty(self, kind: str) -> bool: ...

        def put(self, kind: str, name: str, data: bytes) -> None: ...

        def create(self, kind: str, name: str, data: bytes) -> bool: ...

        def delete(self, kind: str, name: str) -> bool: ...

        def move(self, kind: str, name: str, to: str) -> bool: ...

        def swap(self, kind: str, name: str, old: bytes | None, new: bytes) -> bool: ...

        def fenced(self, claim: str, token: int) -> AbstractContextManager[None]: ...

        def confirm(self, what: str) -> Fencing | None: ...

        def watch(
            self, kinds: tuple[str, ...], on_change: Callable[[], None]
        ) -> Callable[[], None] | None: ...

        def close(self) -> None: ...


class Pause:
    """The sleep between two looks at records, ended early by a change to `kinds` where
    the shelf can watch them (etcd: each look costs round trips, so it waits on a watch
    and looks anyway every `watched_s`); on files a look is a few stat calls: `poll_s`."""

    def __init__(
        self, box: Shelf, kinds: tuple[str, ...], *, poll_s: float, watched_s: float = 10.0
    ) -> None:
        import threading  # only while something waits

        self._changed = threading.Event()
        self._stop = box.watch(kinds, self._changed.set) if kinds else None
        self.every = poll_s if self._stop is None else watched_s

    def sleep(self, deadline: float | None = None) -> None:
        """Until a change, `every` seconds, or the monotonic `deadline`, whichever is first.
        A change made during the last look ends this at once: none is missed."""
        left = self.every if deadline is None else min(self.every, deadline - time.monotonic())
        self._changed.wait(max(left, 0.0))
        self._changed.clear()

    def close(self) -> None:
        stop, self._stop = self._stop, None
        if stop is not None:
            stop()

    def __enter__(self) -> Pause:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


FENCE_ENV = "LOOOP_FENCE"  # `<claim>:<token>`, in the environment of what a fenced beat runs
FENCE_DEADLINE_ENV = "LOOOP_FENCE_DEADLINE"  # the renew deadline, unix seconds


@dataclass(frozen=True, slots=True)
class Fencing:
    """What `confirm` proved just now: `claim` is still held at `token`, and stays held at
    least until `deadline` (unix seconds: the last lease renewal plus the TTL, less a margin
    for clock drift). A side effect starts only after such a proof (moves/act.py)."""

    claim: str
    token: int
    deadline: float

    def env(self) -> dict[str, str]:
        """For the child that carries out the side effect: `looop fence check` reads these."""
        return {**self.claim_env(), FENCE_DEADLINE_ENV: f"{self.deadline:.3f}"}

    def claim_env(self) -> dict[str, str]:
        """The fence alone, for a child that outlives this beat (a worker): no deadline."""
        return {FENCE_ENV: f"{self.claim}:{self.token}"}


KINDS = (
    "asks",
    "answers",
    "approved",
    "forged",
    "rounds",
    "rounds-done",
    "timers",
    "state",
    "memory",
)


# Among the `state` records, two a beat touches without loading their owners:
GOAL_ACTIVITY = "goal-activity"  # when a move last touched each goal (moves/act.py)
FLAP = "flap"  # flapping streaks (spend/limits.py), cleared by every skipped beat


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise UsageError(f"{kind!r} is not a kind of shared record", f"one of {', '.join(KINDS)}")
    return kind


def directory(paths: Paths, kind: str) -> Path:
    """The directory that holds `kind` on the files backend. Only that one path is built:
    a beat asks ~20 times, and a table of all nine cost ~10 path joins each time."""
    match check_kind(kind):
        case "asks":
            return paths.asks
        case "answers":
            return paths.answers
        case "approved":
            return paths.approved
        case "forged":
            return paths.state / "forged"
        case "rounds":
            return paths.rounds
        case "rounds-done":
            return paths.rounds / "done"
        case "timers":
            return paths.timers
        case "state":
            return paths.state
        case "memory":
            return paths.memory
    raise AssertionError(f"KINDS has {kind!r} and directory() no folder for it")  # a bug here


class FilesShelf:
    """Each kind a directory of `<name>.json` files, written atomically (the default)."""

    backend = "files"
    shared = False

    def __init__(self, paths: Paths, host: str = "") -> None:
        self.paths = paths
        self.host = host

    def _path(self, kind: str, name: str) -> Path:
        return directory(self.paths, kind) / f"{check_segment(name, 'record name')}.json"

    def where(self, kind: str, name: str) -> str:
        return str(self._path(kind, name))

    def get(self, kind: str, name: str) -> bytes | None:
        try:
            return jsonio.read_bounded(self._path(kind, name), jsonio.STATE_CAP)
        except FileNotFoundError:
            return None

    def names(self, kind: str) -> list[str]:
        try:
            found = os.listdir(directory(self.paths, kind))
        except FileNotFoundError:
            return []
        stems = (n.removesuffix(".json") for n in found if n.endswith(".json"))
        return sorted(s for s in stems if is_safe_segment(s))

    def items(self, kind: str) -> list[tuple[str, bytes | None]]:
        found: list[tuple[str, bytes | None]] = []
        for name in self.names(kind):
            try:
                found.append((name, self.get(kind, name)))
            except (CorruptFile, OSError):
                found.append((name, None))  # not a regular file, over the cap: seen, unread
        return found

    def empty(self, kind: str) -> bool:
        try:
            with os.scandir(directory(self.paths, kind)) as it:
                return not any(e.name.endswith(".json") for e in it)
        except FileNotFoundError:
            return True

    def put(self, kind: str, name: str, data: bytes) -> None:
        path = self._path(kind, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        jsonio.atomic_write(path, data)

    def create(self, kind: str, name: str, data: bytes) -> bool:
        path = self._path(kind, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        return create_exclusive(path, data)

    def delete(self, kind: str, name: str) -> bool:
        try:
            self._path(kind, name).unlink()
        except FileNotFoundError:
            return False
        return True

    def move(self, kind: str, name: str, to: str) -> bool:
        target = self._path(to, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(self._path(kind, name), target)
        except FileNotFoundError:
            return False
        return True

    def swap(self, kind: str, name: str, old: bytes | None, new: bytes) -> bool:
        """Write `new` only if the record is still `old` (None: absent), under a lock file
        beside it (`.<name>.lock`), so processes on this machine take turns."""
        import fcntl  # only for a read-modify-write (the ledger)

        path = self._path(kind, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(f".{path.stem}.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if self.get(kind, name) != old:
                return False
            jsonio.atomic_write(path, new)
            return True
        finally:
            os.close(fd)  # closing the descriptor drops the flock

    @contextlib.contextmanager
    def fenced(self, claim: str, token: int) -> Iterator[None]:
        yield  # one machine: the beat's flock already keeps every other writer out

    def confirm(self, what: str) -> Fencing | None:
        """Nothing to ask: on one machine the beat's flock is the fence, held until it ends."""
        return None

    def watch(
        self, kinds: tuple[str, ...], on_change: Callable[[], None]
    ) -> Callable[[], None] | None:
        """None: the records are files in the work dir, which `looop up` watches itself."""
        return None

    def close(self) -> None:
        pass  # nothing held open


def create_exclusive(path: Path, data: bytes) -> bool:
    """Write `path` only if it does not exist yet; False if it does. Never torn: link(2) of
    a complete temp file."""
    import threading  # only when a record is created

    tmp = path.with_name(
        f".{path.name}.{os.getpid()}-{threading.get_native_id()}{jsonio.TMP_SUFFIX}"
    )
    jsonio.atomic_write(tmp, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return True


# -- JSON on any shelf ---------------------------------------------------------------------


def parse(shelf: Shelf, kind: str, name: str, data: bytes) -> Any:
    try:
        return jsonio.loads_bounded(data)
    except ValueError as exc:  # not JSON, or nested past jsonio.MAX_DEPTH
        raise CorruptFile(
            f"{shelf.where(kind, name)} is not valid JSON ({exc})",
            "move it aside and run the command again; looop rebuilds what it can",
        ) from exc


def read_json(shelf: Shelf, kind: str, name: str, default: Any = None) -> Any:
    """The record parsed; `default` when there is none; CorruptFile when it is not JSON."""
    data = shelf.get(kind, name)
    return default if data is None else parse(shelf, kind, name, data)


def read_object(shelf: Shelf, kind: str, name: str) -> dict[str, Any] | None:
    """The record if it is a JSON object; None when missing, corrupt or another shape.

    For records looop rebuilds (ledgers, caches, indexes): one that does not fit starts
    afresh rather than stopping the loop. Records a human must hear about use read_json.
    """
    try:
        data = read_json(shelf, kind, name)
    except CorruptFile:
        return None
    return data if isinstance(data, dict) else None


def json_items(shelf: Shelf, kind: str) -> list[tuple[str, Any]]:
    """(name, value) of every record of `kind`, by name; an unreadable one maps to None."""
    found: list[tuple[str, Any]] = []
    for name, data in shelf.items(kind):
        try:
            found.append((name, None if data is None else parse(shelf, kind, name, data)))
        except CorruptFile:
            found.append((name, None))
    return found


def dumps(value: Any) -> bytes:
    return jsonio.dumps(value, pretty=True) + b"\n"


def write_json(shelf: Shelf, kind: str, name: str, value: Any) -> None:
    shelf.put(kind, name, dumps(value))
