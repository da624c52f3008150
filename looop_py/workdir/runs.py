"""runs/<id>/: the archive of every decide (prompt, raw output, parsed move, metadata)."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from looop_py import jsonio
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths


def new_run(paths: Paths) -> Path:
    """A fresh runs/<id>/; ids sort in the order the decides happened."""
    paths.runs.mkdir(exist_ok=True)
    ns = time.time_ns()  # the real clock, so names stay ordered even under a test clock
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(ns / 1e9))
    run = paths.runs / f"{stamp}.{ns % 1_000_000_000:09d}-{os.getpid()}"
    run.mkdir()
    return run


def write(wd: WorkDir, run: Path, name: str, data: bytes | str | dict[str, Any]) -> None:
    """One file of a decide's archive; secret values in it are redacted (workdir/environ.py).

    Atomic but not fsynced: an archive to read, like the journal and events.jsonl beside
    it (appended, never fsynced); what a decide spent and decided is in the durable
    ledgers and the committed world. A crash may lose a run's files, never a record."""
    if isinstance(data, dict):
        raw = jsonio.dumps(data, pretty=True) + b"\n"
    else:
        raw = data.encode("utf-8") if isinstance(data, str) else data
    jsonio.atomic_write(run / name, wd.redact_bytes(raw), durable=False)


def prune(paths: Paths, keep: int) -> list[str]:
    """Keep the newest `keep` runs (0 keeps all); the ids of the runs removed."""
    removed: list[str] = []
    if keep <= 0:
        return removed
    folder = paths.runs
    with contextlib.suppress(FileNotFoundError):
        # Names from one scandir (no stat of each run, no Path for the ones kept): every
        # full beat lists runs/, up to runs_keep + 1 of them.
        with os.scandir(folder) as entries:
            runs = sorted(e.name for e in entries if e.is_dir())
        for name in runs[:-keep]:
            _remove(folder / name)
            removed.append(name)
    return removed


def _remove(run: Path) -> None:
    """Delete one run: its files, then the folder, never following a link. A run holds only
    files, so shutil (it imports bz2, lzma and zlib: a full beat's fixed cost) is loaded
    only for something else: a folder inside, or a run that is not a folder."""
    try:
        fd = os.open(run, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        raise IsADirectoryError(entry.name)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.name, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(run)
    except OSError:
        import shutil  # only for a run that is not a folder of files (see above)

        shutil.rmtree(run, ignore_errors=True)
