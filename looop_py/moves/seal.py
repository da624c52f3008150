"""The approval seal: proof that a human's `approve`, through looop, recorded an intent.

Anything that can write one file of the work dir (a worker whose agent may only edit
files, a sensor, a writer of the etcd prefix) can also write an ask, its answer and an
intent that agree with each other. What it cannot write without more is the seal: an
HMAC-SHA256, under a key kept outside every work dir (the user's state directory,
mode 0600), over the ask id, when and by whom it was asked, and the digest of exactly
what it holds (the move and the text the human was shown). `looop approve` (the CLI,
the page, the Python API) makes the key on first use and seals the intent; a beat
carries out only intents whose seal checks against the ask as it is now.

What the seal does not stop: a process running as the same user can read the key
(or simply run `looop approve`); with etcd, every pulse host needs the same key file
(copy it), and any writer of the prefix can still delete or deny asks.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from looop_py.errors import LooopError

KEY_BYTES = 32
VERSION = "looop-approval-v1"


class SealError(LooopError):
    """The key that seals approvals cannot be read or made; nothing was approved."""

    exit_code = 3


def key_path() -> Path:
    """$XDG_STATE_HOME/looop/approval.key (default ~/.local/state/looop/approval.key)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "looop" / "approval.key"


def _read(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SealError(
            f"cannot read the approval key {path}: {exc.strerror}",
            "it must be a file only you can read (chmod 600)",
        ) from None
    return data if len(data) == KEY_BYTES else None


def _key(*, make: bool) -> bytes | None:
    path = key_path()
    found = _read(path)
    if found is not None or not make:
        return found
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read(path)  # another approver made it meanwhile (or left it torn: refused)
    except OSError as exc:
        raise SealError(
            f"cannot create the approval key {path}: {exc.strerror}",
            "make its directory writable by you, or set XDG_STATE_HOME",
        ) from None
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(KEY_BYTES))
        out.flush()
        os.fsync(out.fileno())
    return _read(path)


def digest(hold: dict[str, Any]) -> str:
    """sha256 of the held move and what the ask showed, canonically encoded."""
    text = json.dumps(hold, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _message(ask_id: str, created_at: float, asker: str, hold_digest: str) -> bytes:
    return json.dumps([VERSION, ask_id, repr(created_at), asker, hold_digest]).encode()


def sign(ask_id: str, created_at: float, asker: str, hold: dict[str, Any]) -> str:
    """The seal of an approval (makes the key on first use: only a human's approve calls it)."""
    key = _key(make=True)
    if key is None:
        raise SealError(f"the approval key {key_path()} is damaged", "remove it and approve again")
    return hmac.new(key, _message(ask_id, created_at, asker, digest(hold)), "sha256").hexdigest()


def check(
    seal: Any, ask_id: str, created_at: float, asker: str, hold: dict[str, Any]
) -> str | None:
    """Why `seal` does not prove an approval of this ask as it is now; None when it does."""
    if not isinstance(seal, str) or not seal:
        return "it carries no seal (not written by `looop approve`)"
    key = _key(make=False)
    if key is None:
        return f"no approval key at {key_path()} (this user never approved anything here)"
    want = hmac.new(key, _message(ask_id, created_at, asker, digest(hold)), "sha256").hexdigest()
    if not hmac.compare_digest(want, seal):
        return "its seal does not match the ask (forged, or the ask changed since)"
    return None
