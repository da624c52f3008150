"""The seal: proof that a human's answer, through looop, recorded an intent or an answer.

Anything that can write one file of the work dir (a worker whose agent may only edit
files, a sensor, a writer of the etcd prefix) can also write an ask, its answer and an
intent that agree with each other. What it cannot write without more is the seal: an
HMAC-SHA256, under a key kept outside every work dir (the user's state directory,
mode 0600), over the ask id, when and by whom it was asked, and the digest of exactly
what it holds (the move and the text the human was shown). `looop approve` (the CLI,
the page, the Python API) makes the key on first use and seals the intent; a beat
carries out only intents whose seal checks against the ask as it is now.

Answers are sealed the same way (`answer_seal`): every answer looop writes (`looop
approve/deny/answer/withdraw`, the page, the API, a beat recording what ran) carries an
HMAC over the ask it answers and the whole answer record. A loop round moves on, and a
waiting `looop ask` returns, only on an answer whose seal checks (asks/mailbox.py).

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
ANSWER_VERSION = "looop-answer-v1"
# What an answer's seal binds of its ask: the fields that never change once it is filed.
ASK_FIELDS = ("id", "kind", "prompt", "asker", "created_at", "options", "ref", "hold")


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


def _answer_message(ask: dict[str, Any], record: dict[str, Any]) -> bytes:
    bound = {k: ask.get(k) for k in ASK_FIELDS}
    body = {k: v for k, v in record.items() if k != "seal"}
    text = json.dumps([ANSWER_VERSION, bound, body], sort_keys=True, ensure_ascii=True)
    return text.encode()


def answer_seal(ask: dict[str, Any], record: dict[str, Any]) -> str:
    """The seal of an answer record to `ask` (its to_json); makes the key on first use."""
    key = _key(make=True)
    if key is None:
        raise SealError(f"the approval key {key_path()} is damaged", "remove it and answer again")
    return hmac.new(key, _answer_message(ask, record), "sha256").hexdigest()


def check_answer(ask: dict[str, Any], record: dict[str, Any]) -> str | None:
    """Why `record` is not an answer looop wrote to exactly this ask; None when it is."""
    given = record.get("seal")
    if not isinstance(given, str) or not given:
        return "it carries no seal (not written by looop's answer, approve or deny)"
    key = _key(make=False)
    if key is None:
        return f"no approval key at {key_path()} (this user never answered anything here)"
    want = hmac.new(key, _answer_message(ask, record), "sha256").hexdigest()
    if not hmac.compare_digest(want, given):
        return "its seal does not match (forged, edited, or written for another ask)"
    return None
