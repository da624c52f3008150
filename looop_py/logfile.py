"""Append-only line files (events.jsonl, errors.log) and the UTC stamps their lines carry.

os and time only: the quiet beat appends its event line without loading a JSON
library (beat/quiet.py), and jsonio and the journal use the same two functions. The
quiet beat spells its JSON with `json_str` and `json_literal` for the same reason.
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


_ESCAPES = {i: f"\\u{i:04x}" for i in range(32)}
_ESCAPES.update({ord('"'): '\\"', ord("\\"): "\\\\", 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f"})
_ESCAPES[13] = "\\r"


def json_literal(value: object) -> str:
    """A scalar as JSON: a sensor's error field (an exit code or a word), say."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value) if isinstance(value, int) else json_str(str(value))


def json_str(text: str) -> str:
    """A JSON string literal (RFC 8259 escapes; other characters as UTF-8)."""
    return '"' + text.translate(_ESCAPES) + '"'
