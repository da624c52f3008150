"""`looop approve` and `looop deny`: a human answers what a gate held back.

The answer is recorded first, exclusively, so two people approving at once
run the move once; the move then runs under the pulse lock so it never races
a beat, and what happened is added to the answer and the journal.
"""

from __future__ import annotations

from looop_py.errors import Busy, UsageError
from looop_py.locks import PulseLock
from looop_py.loops import advance, store
from looop_py.moves import act, union
from looop_py.workdir import config as config_mod
from looop_py.workdir import journal, mailbox
from looop_py.workdir.mailbox import Answer
from looop_py.workdir.paths import Paths

LOCK_WAIT_S = 120.0


def _approval(paths: Paths, ask_id: str) -> mailbox.Ask:
    ask = mailbox.get_ask(paths, ask_id)
    if ask.kind is not mailbox.AskKind.APPROVAL:
        raise UsageError(
            f"{ask_id} is a question, not an approval", f"answer it: looop answer {ask_id} TEXT"
        )
    if mailbox.get_answer(paths, ask_id) is not None:
        raise UsageError(f"{ask_id} was already answered", "see `looop journal` for what happened")
    return ask


def _settle_round(paths: Paths, round_id: str, now: float) -> str:
    """Move an answered round on at once (the executor, or the refusal into memory)."""

    cfg = config_mod.load(paths.config, paths.config_cache)
    lock = PulseLock(paths.pulse_lock)
    if not lock.acquire(timeout_s=LOCK_WAIT_S):
        return "the next beat carries it on"
    try:
        state = store.RoundFiles(paths.rounds).load(round_id)
        state = advance.engine_for(paths, cfg, state.spec, clock=lambda: now).settle(state, now)
    finally:
        lock.release()
    outcome = state.outcome.value if state.outcome else state.phase.value
    return f"round {round_id}: {outcome}" + (f" ({state.error})" if state.error else "")


def approve(paths: Paths, ask_id: str, *, now: float) -> Answer:
    ask = _approval(paths, ask_id)
    if "round" in ask.hold:
        mailbox.answer(paths, ask_id, "approved", now=now, verdict="approved")
        note = _settle_round(paths, str(ask.hold["round"]), now)
        journal.write(paths, f"✓ approved {ask_id}: {note}", now)
        return mailbox.answer(
            paths, ask_id, "approved", now=now, verdict="approved", note=note, force=True
        )
    cfg = config_mod.load(paths.config, paths.config_cache)
    held = ask.hold.get("move")
    if not isinstance(held, dict):
        raise UsageError(f"{ask_id} holds nothing looop can run")
    move = union.parse(held)  # re-validated: the file could have been edited
    mailbox.answer(paths, ask_id, "approved", now=now, verdict="approved")
    lock = PulseLock(paths.pulse_lock)
    if not lock.acquire(timeout_s=LOCK_WAIT_S):
        raise Busy("a pulse held the lock for two minutes", f"run `looop approve {ask_id}` again")
    try:
        outcome = act.execute(paths, cfg, move, now, approved=True)
    finally:
        lock.release()
    note = ("ran: " if outcome.ok else "failed: ") + (outcome.note or "ok")
    journal.write(
        paths, f"{'✓' if outcome.ok else '✗'} approved {ask_id}: {move.summary()} · {note}", now
    )
    return mailbox.answer(
        paths, ask_id, "approved", now=now, verdict="approved", note=note, force=True
    )


def deny(paths: Paths, ask_id: str, *, now: float, reason: str | None = None) -> Answer:
    ask = _approval(paths, ask_id)
    held = ask.hold.get("move") or {}
    text = f"denied {ask_id}: {held.get('action', 'move')}" + (f" · {reason}" if reason else "")
    answer = mailbox.answer(paths, ask_id, "denied", now=now, verdict="denied", note=reason)
    if "round" in ask.hold:
        text = f"denied {ask_id}: {_settle_round(paths, str(ask.hold['round']), now)}"
        text += f" · {reason}" if reason else ""
    journal.write(paths, f"✗ {text}", now)
    return answer
