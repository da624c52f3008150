"""Answers looop did not write: how one is told, and what becomes of it.

An answer acts (moves a loop round on, reaches a waiting `looop ask`, lets a beat carry
out an approval) only with a seal (asks/seal.py) over exactly its ask and record. One
without is a forgery: it is moved to the shelf's `forged` kind as `<ask>.answer`, the
journal and events.jsonl say so, the next notification tells the human (beat/notify.py),
and the ask waits for its human as before.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from looop_py.asks import seal
from looop_py.workdir import journal, shelf

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir

FORGED = "forged"  # the shelf's kind for refused forgeries


def reason(ask: dict[str, Any] | None, record: Any) -> str | None:
    """Why `record` is not an answer looop wrote to `ask` (its to_json) as it is; None if it
    is. A round's proposal its checker did not verify is approved only `--unverified`."""
    if not isinstance(record, dict):
        return "the record is not an answer looop wrote"
    if ask is None:
        return "no ask with that id exists"
    why = seal.check_answer(ask, record)
    hold = ask.get("hold") or {}
    unchecked = isinstance(hold, dict) and hold.get("verified") is False
    approved = record.get("verdict") == "approved" and record.get("unverified") is not True
    if why is None and unchecked and approved:
        why = "it approves a proposal its checker did not verify, without --unverified"
    return why


def refuse(wd: WorkDir, ask_id: str, raw: bytes, why: str, now: float) -> None:
    """Move a forged answer aside (`forged`, <ask>.answer), journal it, emit an event."""
    box = wd.shelf
    name = f"{ask_id}.answer"
    record = {"v": 1, "ask": ask_id, "what": "answer", "why": why, "at": now}
    box.put(FORGED, name, shelf.dumps({**record, "record": raw.decode("utf-8", "replace")}))
    if box.get("answers", ask_id) == raw:  # a genuine answer written since is left alone
        box.delete("answers", ask_id)
    with contextlib.suppress(OSError):
        where = box.where(FORGED, name)
        journal.write(wd, f"✗ forged answer to {ask_id} refused: {why} (kept as {where})", now)
        journal.emit(wd, "answer_forged", now, ask=ask_id, why=why)
