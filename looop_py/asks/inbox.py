"""sessions/<id>/inbox/: steering messages for a running worker (`looop tell`, `looop told`).

`looop tell WORKER TEXT` drops one message, created exclusively, named so they
sort in the order they were told; `looop told` (run by the worker, as its
contract says) prints the unread ones and moves them to inbox/read/, so each
message is read once.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from looop_py import jsonio
from looop_py.errors import UsageError
from looop_py.ids import check_segment
from looop_py.workdir.paths import Paths
from looop_py.workdir.shelf import create_exclusive

MAX_TEXT = 16 * 1024


def _inbox(paths: Paths, worker_id: str) -> Path:
    return paths.sessions / check_segment(worker_id, "worker id") / "inbox"


def tell(paths: Paths, worker_id: str, text: str, *, sender: str, now: float) -> dict[str, Any]:
    """Leave a message for a worker; the message as stored."""
    session = paths.sessions / check_segment(worker_id, "worker id")
    if not session.is_dir():
        raise UsageError(f"no worker {worker_id}", "see `looop workers --all`")
    if not text.strip():
        raise UsageError("the message is empty")
    box = _inbox(paths, worker_id)
    box.mkdir(exist_ok=True)
    message = {"text": text[:MAX_TEXT], "from": sender, "at": now, "read_at": None}
    for _ in range(100):
        name = f"{time.time_ns():020d}-{os.getpid()}.json"
        if create_exclusive(box / name, jsonio.dumps({**message, "id": name[:-5]})):
            return {**message, "id": name[:-5], "worker": worker_id}
    raise UsageError("could not name the message")  # pragma: no cover


def _read_dir(directory: Path) -> list[dict[str, Any]]:
    out = []
    with contextlib.suppress(FileNotFoundError):
        for p in sorted(directory.glob("*.json")):
            with contextlib.suppress(Exception):
                data = jsonio.read_json(p)
                if isinstance(data, dict):
                    out.append(data)
    return out


def told(paths: Paths, worker_id: str, *, now: float) -> list[dict[str, Any]]:
    """The unread messages, oldest first, each marked read (moved to inbox/read/)."""
    box = _inbox(paths, worker_id)
    unread = _read_dir(box)
    if unread:
        (box / "read").mkdir(exist_ok=True)
    out = []
    for m in unread:
        src = box / f"{m.get('id')}.json"
        dst = box / "read" / src.name
        jsonio.write_json(dst, {**m, "read_at": now})
        try:
            src.unlink()
        except FileNotFoundError:
            continue  # another `told` took it first
        out.append({**m, "read_at": now})
    return out


def messages(paths: Paths, worker_id: str) -> list[dict[str, Any]]:
    """Every message told to a worker, read or not, oldest first."""
    box = _inbox(paths, worker_id)
    both = _read_dir(box / "read") + _read_dir(box)
    return sorted(both, key=lambda m: str(m.get("id")))
