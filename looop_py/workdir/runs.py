"""runs/<id>/: the archive of every decide (prompt, raw output, parsed move, metadata)."""

from __future__ import annotations

import contextlib
import os
import shutil
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
    with contextlib.suppress(FileNotFoundError):
        runs = sorted((p for p in paths.runs.iterdir() if p.is_dir()), key=lambda p: p.name)
        for old in runs[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
            removed.append(old.name)
    return removed
