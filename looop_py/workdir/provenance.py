"""state/provenance.json: which work-dir files a decider wrote, and whether a human approved.

A file a decider wrote is recorded with the hash of the bytes it wrote. As
long as the file still holds exactly those bytes, it counts as written by a
model (approved or not); any edit by a person changes the hash, and the file
is then the person's again. A loop whose goal file a model last wrote without
approval runs at most at L1 (loops/specs.py); a goal a model last wrote is
never the human rule that lets a worker run its `work:` unasked (moves/gate.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

from looop_py import jsonio
from looop_py.errors import LooopError
from looop_py.workdir.paths import Paths

ABSENT = "absent"


def fingerprint(data: bytes | None) -> str:
    """The file's identity for approvals and provenance: sha256 of its bytes, or "absent"."""
    return ABSENT if data is None else "sha256:" + hashlib.sha256(data).hexdigest()


def _load(paths: Paths) -> dict[str, Any] | None:
    """The ledger's entries; None when it cannot be read (then nothing counts as human)."""
    try:
        data = jsonio.read_json(paths.provenance, {})
    except LooopError:
        return None
    files = data.get("files") if isinstance(data, dict) else None
    return dict(files) if isinstance(files, dict) else None


def record(paths: Paths, rel: str, data: bytes, *, approved: bool, now: float) -> None:
    """A decider wrote `data` to `rel` (work-dir relative), approved by a human or not."""
    files = _load(paths) or {}
    files[rel] = {"fingerprint": fingerprint(data), "approved": approved, "at": now}
    jsonio.write_json(paths.provenance, {"v": 1, "files": files})


def written_by_model(paths: Paths, rel: str, data: bytes | None) -> bool:
    """Did a model write exactly these bytes without a human's approval?"""
    if data is None or not paths.provenance.exists():
        return False
    files = _load(paths)
    if files is None:
        return True  # an unreadable ledger fails closed
    entry = files.get(rel)
    return (
        isinstance(entry, dict)
        and entry.get("fingerprint") == fingerprint(data)
        and entry.get("approved") is not True
    )
