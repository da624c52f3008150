"""What the page's buttons do beyond one core call (no web stack)."""

from __future__ import annotations

import time
from typing import Any

from looop_py.asks import mailbox
from looop_py.errors import Busy
from looop_py.locks import PulseLock
from looop_py.loops import advance
from looop_py.moves import approvals
from looop_py.workdir.context import WorkDir


def start_round(wd: WorkDir, loop: str) -> dict[str, Any]:
    """Start a round of `loop` now, under the pulse lock (it never races a beat)."""
    lock = PulseLock(wd.paths.pulse_lock)
    if not lock.acquire(timeout_s=approvals.LOCK_WAIT_S):
        raise Busy("a pulse held the lock for two minutes", "try again")
    try:
        state = advance.start_round(wd, loop, now=time.time(), trigger="page")
    finally:
        lock.release()
    return {"round": state.id, "loop": loop, "phase": state.phase.value}


def answer_json(ask_id: str, got: mailbox.Answer) -> dict[str, Any]:
    """The shape of `looop answer|approve|deny --json`."""
    return {
        "id": ask_id,
        "answer": got.text,
        "answered_at": got.answered_at,
        "verdict": got.verdict,
        "note": got.note,
    }
