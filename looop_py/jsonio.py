"""orjson lives here: canonical bytes, atomic writes, appended lines, safe reads.

Every file looop writes goes through `atomic_write`: a temp file in the same
directory, fsync, rename. A reader therefore sees the old file or the new one,
never a torn one, whenever the writer dies.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import orjson

from looop_py.errors import CorruptFile
from looop_py.ids import is_safe_segment

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TMP_SUFFIX = ".tmp"
ROTATE_BYTES = 5 * 1024 * 1024


def canonical(value: Any) -> bytes:
    """Compact JSON with sorted keys: the one byte form that enters hashes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def dumps(value: Any, *, pretty: bool = False) -> bytes:
    option = orjson.OPT_SORT_KEYS | (orjson.OPT_INDENT_2 if pretty else 0)
    return orjson.dumps(value, option=option)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


JSONDecodeError = orjson.JSONDecodeError


def atomic_write(path: Path, data: bytes, *, mode: int | None = None, durable: bool = True) -> None:
    """Replace `path` with `data` so that no reader or crash ever sees half a file.

    `durable=False` skips the fsync: still atomic for readers and for a writer
    that dies, only a power loss may roll it back (fine for state that dies
    with its processes anyway, such as leases).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_native_id()}{TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    if mode is not None:
        os.chmod(tmp, mode)  # O_CREAT's mode is filtered by the umask
    os.replace(tmp, path)


def write_json(path: Path, value: Any, *, durable: bool = True) -> None:
    atomic_write(path, dumps(value, pretty=True) + b"\n", durable=durable)


def write_json_if_changed(path: Path, value: Any) -> bool:
    """Write only when the bytes differ; otherwise just refresh the mtime.

    Snapshots are rewritten every beat; skipping identical writes keeps the
    quiet path free of fsyncs while the mtime still says when it was taken.
    """
    data = dumps(value) + b"\n"
    try:
        if path.read_bytes() == data:
            os.utime(path)
            return False
    except OSError:
        pass
    atomic_write(path, data)
    return True


def read_json(path: Path, default: Any = None) -> Any:
    """Parse a JSON file; a missing file gives `default`, a corrupt one raises."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return default
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptFile(
            f"{path} is not valid JSON ({exc})",
            "move it aside and run the command again; looop rebuilds what it can",
        ) from exc


def append_line(path: Path, value: Any, *, rotate_bytes: int = ROTATE_BYTES) -> None:
    """Append one JSON line with a single write(2); rotate to `<name>.1` past the limit."""
    append_text(path, (orjson.dumps(value) + b"\n"), rotate_bytes=rotate_bytes)


def append_text(path: Path, data: bytes, *, rotate_bytes: int = ROTATE_BYTES) -> None:
    if rotate_bytes:
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_size + len(data) > rotate_bytes:
                os.replace(path, path.with_name(path.name + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def tail_lines(path: Path, n: int, *, chunk: int = 65536) -> list[bytes]:
    """The last `n` complete lines of a file, read from the end (never the whole file)."""
    if n <= 0:
        return []
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return []
    with f:
        end = f.seek(0, os.SEEK_END)
        pos, buf = end, b""
        while pos > 0 and buf.count(b"\n") <= n:
            step = min(chunk, pos)
            pos -= step
            f.seek(pos)
            buf = f.read(step) + buf
    lines = buf.split(b"\n")
    if pos > 0:
        lines = lines[1:]  # the first piece may be a partial line
    return [line for line in lines if line.strip()][-n:]


def iter_json_lines(lines: list[bytes]) -> Iterator[Any]:
    """Parse JSON lines, skipping any a crash tore in half."""
    for line in lines:
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            continue


def json_files(directory: Path, *, skip: set[str] | None = None) -> list[tuple[str, Any]]:
    """(stem, parsed value) of each `<safe name>.json` in a directory, sorted by name.

    A file that is not valid JSON maps to None; hidden files, temp files and
    names in `skip` (file names) are left out; a missing directory is empty.
    """

    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    found: list[tuple[str, Any]] = []
    for name in names:
        stem = name.removesuffix(".json")
        if stem == name or not is_safe_segment(stem) or (skip and name in skip):
            continue
        try:
            found.append((stem, read_json(directory / name)))
        except (CorruptFile, OSError):
            found.append((stem, None))
    return found


def sweep_temp_files(directory: Path, *, older_than_s: float, now: float) -> int:
    """Remove temp files a killed writer left behind; returns how many went."""
    removed = 0
    try:
        entries = os.scandir(directory)
    except FileNotFoundError:
        return 0
    with entries:
        for entry in entries:
            if entry.name.startswith(".") and entry.name.endswith(TMP_SUFFIX):
                with contextlib.suppress(OSError):
                    if now - entry.stat().st_mtime > older_than_s:
                        os.unlink(entry.path)
                        removed += 1
    return removed
