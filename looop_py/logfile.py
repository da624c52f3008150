"""Append-only line files (events.jsonl, errors.log) and the UTC stamps their lines carry.

os and time only: the quiet beat appends its event line without loading a JSON
library (beat/quiet.py), and jsonio and the journal use the same two functions.
"""

from __future__ import annotations

import os
import time

ROTATE_BYTES = 5 * 1024 * 1024


def append_text(
    path: str | os.PathLike[str], data: bytes, *, rotate_bytes: int = ROTATE_BYTES
) -> None:
    """One O_APPEND write; past `rotate_bytes` the file first moves aside to PATH.1."""
    if rotate_bytes:
        try:
            if os.stat(path).st_size + len(data) > rotate_bytes:
                os.replace(path, f"{os.fspath(path)}.1")
        except FileNotFoundError:
            pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    except OSError as exc:  # a full disk: say which file (os.write does not)
        raise OSError(exc.errno, exc.strerror, os.fspath(path)) from None
    finally:
        os.close(fd)


def iso(ts: float) -> str:
    """UTC, millisecond precision: 2026-11-22T09:30:00.123Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"
