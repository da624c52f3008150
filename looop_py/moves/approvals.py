"""`looop approve` and `looop deny`: a human answers what a gate held back.

An approval runs exactly what its ask showed, once, and durably:

1. `approve` judges the held move again against the files as they are now: if
   the file it would replace changed since the ask (its fingerprint), or what
   would run is no longer what the ask shows, it is refused as stale (answered
   `stale`, journaled, nothing runs).
2. It records the approval as an intent (the shelf's `approved` record,
   state/approved/<ask>.json on one machine), created exclusively (two people
   approving at once record it once), then answers.
3. It carries the intent out under the pulse lock, so it never races a beat.
   If it cannot get the lock in time, or dies or is killed while waiting, the
   next beat carries it out instead (`carry_out_pending`, early in every
   beat). Either way it runs once and one journal line says what happened.
   With a shared backend (etcd) the next beat always does, on whichever host
   holds the pulse, its writes fenced by the pulse token.

An intent is carried out only when it proves a human approved it: its ask
exists, is an approval, is not answered otherwise, and the intent's seal
(asks/seal.py: an HMAC under a key kept outside the work dir) matches the ask
as it is now, so what runs is exactly what the human was shown. Anything else
(a file written by a worker, a sensor or an etcd-prefix writer, or an ask edited
after it was approved) is a forgery: nothing runs, the record is moved to the
`forged` kind (state/forged/), the journal says so, and the next notification
tells the human.

An intent found half-run (its actor died mid-move) is reported and never
re-run, like any other interrupted move. Round approvals are answers the
round's own state machine picks up, so they are durable as they are; like every
answer they are sealed to their ask, and the round acts only on a sealed one
(asks/forged.py refuses the rest).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from looop_py.asks import mailbox, seal
from looop_py.asks.mailbox import Answer
from looop_py.errors import CorruptFile, FenceLost, LooopError, UsageError
from looop_py.locks import PulseLock
from looop_py.loops import advance, store
from looop_py.moves import act, gate, union
from looop_py.workdir import journal, shelf
from looop_py.workdir.context import WorkDir

LOCK_WAIT_S = 120.0
WAITING = "approved; waiting for the pulse lock to run it"
QUEUED = "approved; a pulse held the lock, so the next beat runs it"
NOTHING_RAN = "nothing ran"  # how an approval's note starts when no command ran


class StaleApproval(UsageError):
    """What the ask showed is no longer what would run; nothing ran."""


def _approval(wd: WorkDir, ask_id: str, now: float) -> mailbox.Ask:
    ask = mailbox.get_ask(wd, ask_id)
    if ask.kind is not mailbox.AskKind.APPROVAL:
        raise UsageError(
            f"{ask_id} is a question, not an approval", f"answer it: looop answer {ask_id} TEXT"
        )
    if mailbox.checked_answer(wd, ask_id, now=now) is not None:  # a forged one is refused
        raise UsageError(f"{ask_id} was already answered", "see `looop journal` for what happened")
    if wd.shelf.get(INTENTS, ask_id) is not None:
        raise UsageError(f"{ask_id} was already approved", "the next beat carries it out")
    return ask


INTENTS = "approved"  # the shelf's kind for approvals still to be carried out
FORGED = "forged"  # intents refused as forgeries, kept for the human to read


def _pulse_lock(wd: WorkDir) -> PulseLock | None:
    """The pulse lock, taken; None when a beat holds it too long or the pulse is shared
    (etcd: the next beat, on whichever host, carries the approval out under its token)."""
    if wd.shelf.shared:
        return None
    lock = PulseLock(wd.paths.pulse_lock)
    return lock if lock.acquire(timeout_s=LOCK_WAIT_S) else None


def stale_reason(wd: WorkDir, hold: dict[str, Any]) -> str | None:
    """Why the held move may no longer run as shown; None when it still would, exactly."""
    shown = hold.get("runs")
    if not isinstance(shown, str) or not isinstance(hold.get("move"), dict):
        return "the ask does not show what would run"
    try:
        move = union.parse(hold["move"])
    except union.MoveError as exc:
        return f"the held move no longer validates: {exc.message}"
    verdict, fingerprint = gate.judge(wd, move)
    if hold.get("file") and hold.get("fingerprint") != fingerprint:
        return f"{hold['file']} changed since it was asked"
    if verdict.refused is not None:
        return f"the tripwire refuses it ({verdict.refused})"
    if verdict.runs != shown:
        return "what would run is no longer what the ask shows"
    return None


def display(ask: mailbox.Ask) -> str:
    """The text `looop asks` shows for an ask (for approvals: exactly what would run)."""
    return gate.display(ask)


# -- approve ------------------------------------------------------------------------------


def _settle_round(wd: WorkDir, round_id: str, now: float) -> str:
    """Move an answered round on at once (the executor, or the refusal into memory)."""
    lock = _pulse_lock(wd)
    if lock is None:
        return "the next beat carries it on"
    try:
        state = store.rounds_of(wd).load(round_id)
        state = advance.engine_for(wd, state.spec, clock=lambda: now).settle(state, now)
    finally:
        lock.release()
    advance.round_ended(wd, state, now)  # the end it reached is told like any other
    if state.action is not None and not state.action.ran:
        return f"{state.action.summary} (round {round_id})"  # "nothing ran: …": never "proceeded"
    outcome = state.outcome.value if state.outcome else state.phase.value
    return f"round {round_id}: {outcome}" + (f" ({state.error})" if state.error else "")


def approve(
    wd: WorkDir, ask_id: str, *, now: float, by: str | None = None, unverified: bool = False
) -> Answer:
    """Approve a held move or a loop round's proposal. A proposal its checker did not verify
    runs only with `unverified` (`looop approve ID --unverified`): a second, explicit yes.
    `by`: where the approval came from (cli, page), kept in the answer's record."""
    ask = _approval(wd, ask_id, now)
    if "round" in ask.hold and ask.hold.get("verified") is False and not unverified:
        raise UsageError(
            f"{ask_id}: its checker did not verify this proposal, so one approval is not enough",
            f"read it again, then approve it anyway with `looop approve {ask_id} --unverified`,"
            f" or `looop deny {ask_id}`",
        )
    if "round" in ask.hold:
        yes = "approved"  # sealed to the ask, `unverified` in the record when it was given
        mailbox.answer(wd, ask_id, yes, now=now, verdict=yes, by=by, unverified=unverified)
        note = _settle_round(wd, str(ask.hold["round"]), now)
        if note.startswith(NOTHING_RAN):
            journal.write(wd, f"· approved {ask_id}; {note}", now)
        else:
            journal.write(wd, f"✓ approved {ask_id}: {note}", now)
        return mailbox.answer(
            wd, ask_id, yes, now=now, verdict=yes, note=note, force=True, unverified=unverified
        )
    if not isinstance(ask.hold.get("move"), dict):
        raise UsageError(f"{ask_id} holds nothing looop can run")
    stale = stale_reason(wd, ask.hold)
    if stale is not None:
        _refuse_stale(wd, ask_id, stale, now)
    intent = {
        "v": 2,
        "ask": ask_id,
        "hold": ask.hold,
        "digest": seal.digest(ask.hold),
        "approved_at": now,
        "state": "approved",
        "seal": seal.sign(ask.id, ask.created_at, ask.asker, ask.hold),
    }
    if not wd.shelf.create(INTENTS, ask_id, shelf.dumps(intent)):
        raise UsageError(f"{ask_id} was already approved", "the next beat carries it out")
    try:
        mailbox.answer(wd, ask_id, "approved", now=now, verdict="approved", note=WAITING, by=by)
    except UsageError:
        # Denied in the same instant: the answer wins, and the intent is dropped unrun.
        raise UsageError(f"{ask_id} was answered meanwhile", "see `looop journal`") from None
    lock = _pulse_lock(wd)
    if lock is None:
        summary = union.parse(ask.hold["move"]).summary()
        journal.write(wd, f"✓ approved {ask_id}: {summary} · queued for the next beat", now)
        return Answer("approved", now, "approved", QUEUED)
    try:
        note = carry_out(wd, ask_id, now, by="approve")
    finally:
        lock.release()
    got = mailbox.get_answer(wd, ask_id)
    return got if got is not None else Answer("approved", now, "approved", note)


def _refuse_stale(wd: WorkDir, ask_id: str, why: str, now: float) -> None:
    note = f"stale: {why}; nothing ran"
    mailbox.answer(wd, ask_id, "stale", now=now, verdict="stale", note=note, force=True)
    journal.write(wd, f"✗ approval {ask_id} refused as stale: {why}; nothing ran", now)
    raise StaleApproval(
        f"{ask_id} is stale: {why}; nothing ran", "the decider can propose it again"
    )


# -- carrying approvals out (under the pulse lock) ---------------------------------------------


def forgery(wd: WorkDir, ask_id: str, intent: Any) -> str | None:
    """Why this intent does not prove a human approved its ask as it is now; None when it
    does. The ask, not the intent, says what runs: the seal binds the two."""
    if not isinstance(intent, dict):
        return "the record is not an approval looop wrote"
    if intent.get("ask") != ask_id:
        return "the record names another ask"
    try:
        ask = mailbox.get_ask(wd, ask_id)
    except LooopError:
        return "no ask with that id exists"
    if ask.kind is not mailbox.AskKind.APPROVAL:
        return "its ask is a question, not an approval"
    if intent.get("hold") != ask.hold or intent.get("digest") != seal.digest(ask.hold):
        return "what it would run is not what the ask showed"
    return seal.check(intent.get("seal"), ask.id, ask.created_at, ask.asker, ask.hold)


def _refuse_forged(wd: WorkDir, ask_id: str, why: str, now: float, by: str) -> str:
    box = wd.shelf
    raw = box.get(INTENTS, ask_id)
    record = {
        "v": 1,
        "ask": ask_id,
        "why": why,
        "at": now,
        "record": raw.decode("utf-8", "replace") if raw is not None else None,
    }
    box.put(FORGED, ask_id, shelf.dumps(record))
    box.delete(INTENTS, ask_id)
    note = f"forged approval {ask_id} refused: {why}; nothing ran"
    journal.write(wd, f"✗ {note} (kept as {box.where(FORGED, ask_id)})", now)
    journal.emit(wd, "approval_forged", now, ask=ask_id, why=why, by=by)
    return note


def carry_out(wd: WorkDir, ask_id: str, now: float, *, by: str) -> str:
    """Run one recorded approval, exactly once, if it proves a human approved it (else it
    is refused as a forgery); the caller holds the pulse lock."""
    box = wd.shelf
    try:
        intent = shelf.read_json(box, INTENTS, ask_id)
    except CorruptFile:
        intent = None
    if intent is None and box.get(INTENTS, ask_id) is None:
        got = mailbox.get_answer(wd, ask_id)
        return (got.note if got else None) or "already carried out"
    forged = forgery(wd, ask_id, intent)
    if forged is not None:
        return _refuse_forged(wd, ask_id, forged, now, by)
    hold: dict[str, Any] = intent["hold"]
    answer = mailbox.checked_answer(wd, ask_id, now=now)  # a forged denial cannot drop it
    if intent.get("state") == "running":
        note = "interrupted: looop died while running it; not re-run, check its effect by hand"
        return _finish(wd, ask_id, hold, ok=False, note=note, now=now, by=by)
    if answer is not None and answer.verdict != "approved":
        note = f"dropped: it was answered {answer.verdict or answer.text!r}"
        return _finish(wd, ask_id, hold, ok=False, note=note, now=now, by=by, answer=False)
    stale = stale_reason(wd, hold)
    if stale is not None:
        note = f"stale: {stale}; nothing ran"
        return _finish(wd, ask_id, hold, ok=False, note=note, now=now, by=by, verdict="stale")
    move = union.parse(hold["move"])
    running = {**intent, "state": "running", "pid": os.getpid(), "at": now}
    if box.shared:
        running["host"] = box.host
    shelf.write_json(box, INTENTS, ask_id, running)  # on etcd: fenced by this beat's token
    outcome = act.execute(wd, move, now, approved=True)
    note = ("ran: " if outcome.ok else "failed: ") + (outcome.note or "ok")
    return _finish(wd, ask_id, hold, ok=outcome.ok, note=note, now=now, by=by)


def _finish(
    wd: WorkDir,
    ask_id: str,
    hold: dict[str, Any],
    *,
    ok: bool,
    note: str,
    now: float,
    by: str,
    answer: bool = True,
    verdict: str = "approved",
) -> str:
    raw = hold.get("move")
    move: dict[str, Any] = raw if isinstance(raw, dict) else {}
    try:
        summary = union.parse(move).summary()
    except union.MoveError:
        summary = str(move.get("action", "move"))
    mark = "✓" if ok else "✗"
    journal.write(wd, f"{mark} approved {ask_id}: {summary} · {note}", now)
    journal.emit(wd, "approval_carried_out", now, ask=ask_id, ok=ok, by=by, note=note)
    if answer:
        with contextlib.suppress(LooopError):
            mailbox.answer(wd, ask_id, verdict, now=now, verdict=verdict, note=note, force=True)
    wd.shelf.delete(INTENTS, ask_id)
    return note


def carry_out_pending(wd: WorkDir, now: float) -> list[dict[str, Any]]:
    """The beat's share: every approval whose approver did not get to run it. Lock held."""
    events: list[dict[str, Any]] = []
    for ask_id in wd.shelf.names(INTENTS):
        try:
            carry_out(wd, ask_id, now, by="pulse")
        except FenceLost:
            raise  # this beat lost the pulse: nothing more of it may run or be written
        except LooopError as exc:
            events.append({"event": "approval_failed", "ask": ask_id, "message": exc.message})
    return events


# -- deny ------------------------------------------------------------------------------------


def deny(
    wd: WorkDir, ask_id: str, *, now: float, reason: str | None = None, by: str | None = None
) -> Answer:
    ask = _approval(wd, ask_id, now)
    held = ask.hold.get("move") or {}
    text = f"denied {ask_id}: {held.get('action', 'move')}" + (f" · {reason}" if reason else "")
    answer = mailbox.answer(wd, ask_id, "denied", now=now, verdict="denied", note=reason, by=by)
    if "round" in ask.hold:
        text = f"denied {ask_id}: {_settle_round(wd, str(ask.hold['round']), now)}"
        text += f" · {reason}" if reason else ""
    journal.write(wd, f"✗ {text}", now)
    return answer
