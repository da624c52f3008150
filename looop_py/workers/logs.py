"""A worker's output.log as `looop worker logs` shows it: its tail, then what it appends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

from looop_py import jsonio
from looop_py.workdir.context import WorkDir
from looop_py.workers import records

POLL_S = 0.2  # how often a followed log is read again


def read_log(
    wd: WorkDir,
    worker_id: str,
    *,
    last: int | None = None,
    follow: bool = False,
    poll_s: float = POLL_S,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[bytes]:
    """Chunks of the worker's output (stdout and stderr), in order.

    All of output.log, or only its last `last` lines; then, with `follow`,
    whatever the worker appends until it has ended. An unknown id raises
    UsageError before anything is read.
    """
    alive = records.get(wd, worker_id, clock()).alive
    log = records.session_dir(wd.paths, worker_id) / records.OUTPUT
    pos = 0
    if last is not None:
        lines = jsonio.tail_lines(log, last)
        if lines:
            yield b"".join(line + b"\n" for line in lines)
        pos = _size(log)
    while True:
        chunk = _read_from(log, pos)
        if chunk:
            pos += len(chunk)
            yield chunk
        if not follow or not alive:
            return
        sleep(poll_s)
        alive = records.get(wd, worker_id, clock()).alive


def _size(log: Path) -> int:
    try:
        return log.stat().st_size
    except FileNotFoundError:
        return 0


def _read_from(log: Path, pos: int) -> bytes:
    try:
        with log.open("rb") as f:
            f.seek(pos)
            return f.read()
    except FileNotFoundError:
        return b""
