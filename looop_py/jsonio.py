"""orjson lives here: canonical bytes, atomic writes, appended lines, safe reads.

Every file looop writes goes through `atomic_write`: a temp file in the same
directory, fsync, rename. A reader therefore sees the old file or the new one,
never a torn one, whenever the writer dies.
"""

from __future__ import annotations

import _thread  # threading's own primitive; importing threading is a full beat's fixed cost
import contextlib
import math
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

import orjson

from looop_py.errors import CorruptFile
from looop_py.logfile import ROTATE_BYTES as ROTATE_BYTES  # noqa: PLC0414 - re-exported
from looop_py.logfile import append_text as append_text  # noqa: PLC0414 - re-exported

# typing is not imported at run time: a worker's supervisor loads this at every start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TMP_SUFFIX = ".tmp"
# Caps on what looop reads back. Nothing it writes comes near them; a file past
# one is refused with a message, never read whole.
MAX_DEPTH = 64  # JSON nesting: deeper readings become {"error": "too-deep"} snapshots
STATE_CAP = 16 * 1024 * 1024  # one JSON file under state/, rounds/, sessions/, claims/, asks/
TAIL_CAP = 4 * 1024 * 1024  # how far back tail_lines looks for line breaks


def canonical(value: Any) -> bytes:
    """Compact JSON with sorted keys: the one byte form that enters hashes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def dumps(value: Any, *, pretty: bool = False) -> bytes:
    option = orjson.OPT_SORT_KEYS | (orjson.OPT_INDENT_2 if pretty else 0)
    return orjson.dumps(value, option=option)


def loads(data: bytes | memoryview | str) -> Any:
    return orjson.loads(data)


JSONDecodeError = orjson.JSONDecodeError


def number(value: Any) -> float | None:
    """`value` as a float if it is a finite number, else None: the one rule for numbers read back.

    A bool is not a number (JSON `true` is no 1), and neither are NaN and ±inf
    (orjson writes them as null; TOML and Python callers can still hand them in).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        value = float(value)
    except OverflowError:  # an int past the range of a float
        return None
    return value if math.isfinite(value) else None


def atomic_write(
    path: Path, data: bytes | Iterable[bytes], *, mode: int | None = None, durable: bool = True
) -> None:
    """Replace `path` with `data` (bytes, or parts written one after another: a large file
    is never joined in memory) so that no reader or crash ever sees half a file.

    `durable=False` skips the fsync: still atomic for readers and for a writer
    that dies, only a power loss may roll it back (fine for state that dies
    with its processes anyway, such as leases).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{_thread.get_native_id()}{TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
    try:
        for part in [data] if isinstance(data, bytes | bytearray | memoryview) else data:
            view = memoryview(part)
            while view:
                view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None:  # say which file
            raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
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


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def size_text(n: int) -> str:
    """`1 MiB`, `16 KiB`, `9 bytes`: a cap as people write it."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def file_stamp(path: Path | str) -> tuple[int, int, int, int]:
    """What says a file is still the one a parse of it came from: (mtime_ns, ctime_ns,
    size, inode); any edit changes it, even one that keeps the size. OSError as stat."""
    st = os.stat(path)
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def read_stamped(path: Path | str, cap: int) -> tuple[bytes, os.stat_result | None]:
    """The bytes of a regular file of at most `cap` bytes, never more read than that.

    A missing file raises FileNotFoundError; anything else that is not a small
    regular file (a directory, a FIFO, a device such as /dev/zero behind a
    symlink, a file past the cap, an unreadable one) raises CorruptFile with a
    message that does not change while the file stays wrong, so it can enter a
    hash. A FIFO is opened without blocking. With the bytes comes the file's stat when
    it was the same before and after the read (so the bytes are what that stat names;
    None when the file changed while it was read).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise FileNotFoundError(exc.errno, exc.strerror, str(path)) from None
    except OSError as exc:
        raise CorruptFile(f"{path} cannot be read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise CorruptFile(
                f"{path} is {_kind(st.st_mode)}, not a regular file",
                "replace it with a plain file",
            )
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(cap + 1 - total, 1 << 20))
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                raise CorruptFile(
                    f"{path} is larger than the {size_text(cap)} cap",
                    "make it smaller; looop never reads a file past its cap",
                )
            chunks.append(chunk)
        after = os.fstat(fd)
    except OSError as exc:
        raise CorruptFile(f"{path} cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    same = (after.st_ino, after.st_size, after.st_mtime_ns, after.st_ctime_ns) == (
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )
    return b"".join(chunks), st if same else None


def read_bounded(path: Path | str, cap: int) -> bytes:
    """`read_stamped`'s bytes: a small regular file's, never more read than `cap`."""
    return read_stamped(path, cap)[0]


def shape_problem(
    value: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int | None = None
) -> str | None:
    """Why a parsed value is unfit to keep, or None: nested past `max_depth`, or (YAML
    aliases can share one list many times over) more than `max_nodes` values in all.

    Iterative, and it stops at the first problem, so a self-referencing or
    exponentially aliased value costs at most `max_nodes` steps.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if max_nodes is not None and seen > max_nodes:
            return f"holds more than {max_nodes} values"
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > max_depth:
            return f"nests more than {max_depth} levels deep"
        stack.extend((child, depth + 1) for child in children)
    return None


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when lists and objects nest more than `limit` levels (no recursion)."""
    return shape_problem(value, max_depth=limit) is not None


def loads_bounded(data: bytes | str, limit: int = MAX_DEPTH) -> Any:
    """`loads`, but nesting past `limit` raises TooDeep (orjson writes at most 254 levels).

    Counting brackets first keeps this free for the usual flat file.
    """
    value = orjson.loads(data)
    raw = data.encode() if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") > limit and too_deep(value, limit):
        raise TooDeep(f"nested more than {limit} levels deep")
    return value


class TooDeep(ValueError):
    """Parsed JSON nested past the depth looop can store and show."""


def is_depth_error(exc: Exception) -> bool:
    """orjson's own refusal of nesting past 1024 levels."""
    return "depth limit" in str(exc) or "ecursion" in str(exc)


def read_json(path: Path | str, default: Any = None, *, cap: int = STATE_CAP) -> Any:
    """Parse a JSON file; a missing file gives `default`, a corrupt one raises CorruptFile.

    Corrupt includes: not a regular file, over `cap`, not JSON, nested past MAX_DEPTH.
    """
    try:
        data = read_bounded(path, cap)
    except FileNotFoundError:
        return default
    try:
        return loads_bounded(data)
    except (orjson.JSONDecodeError, TooDeep) as exc:
        raise CorruptFile(
            f"{path} is not valid JSON ({exc})",
            "move it aside and run the command again; looop rebuilds what it can",
        ) from exc


def read_object(path: Path | str, *, cap: int = STATE_CAP) -> dict[str, Any] | None:
    """The JSON object in a state file looop rebuilds, or None when there is none that fits.

    None covers missing, torn, over the cap, too deep and not an object: a cache or a
    ledger that does not fit starts afresh rather than stopping the loop.
    """
    try:
        data = read_json(path, None, cap=cap)
    except CorruptFile:
        return None
    return data if isinstance(data, dict) else None


def append_line(path: Path, value: Any, *, rotate_bytes: int = ROTATE_BYTES) -> None:
    """Append one JSON line with a single write(2); rotate to `<name>.1` past the limit."""
    append_text(path, (orjson.dumps(value) + b"\n"), rotate_bytes=rotate_bytes)


def tail_lines(path: Path, n: int, *, chunk: int = 65536) -> list[bytes]:
    """The last `n` complete lines of a file, read from the end (never the whole file)."""
    if n <= 0:
        return []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return []
    f = os.fdopen(fd, "rb")
    with f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []  # a FIFO or a device is no log
        end = f.seek(0, os.SEEK_END)
        pos, buf = end, b""
        while pos > 0 and buf.count(b"\n") <= n and end - pos < TAIL_CAP:
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
