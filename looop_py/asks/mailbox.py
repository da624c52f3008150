"""The human mailbox: asks waiting for answers (asks/<id>.json, answers/<id>.json).

An ask is a question (any worker, or the decider's `ask_human`) or an
approval (a move a gate held back, or a loop round's escalation). Both are
records on the work dir's shelf (workdir/shelf.py): files here, or keys on etcd
that every host sees, so an ask filed on one host is answered from any other.
Asks and answers are created exclusively, so two writers can never both claim
an id or both answer one ask, and a reader never sees half a record.

Every answer looop writes is sealed (asks/seal.py) to its ask. What acts on an answer
(a loop round's escalation, a waiting `looop ask`, a beat carrying out an approval)
reads it through `checked_answer`: an answer without a valid seal is a forgery, moved
aside to the shelf's `forged` kind (<ask>.answer), journaled and notified, and the ask
waits for its human as before.
"""

from __future__ import annotations

import contextlib
import enum
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.asks import forged, seal
from looop_py.errors import CorruptFile, LooopError, NoAnswer, UsageError
from looop_py.identity import create_time, is_alive
from looop_py.ids import check_segment, is_safe_segment
from looop_py.workdir import journal, shelf

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir

POLL_S = 0.2


class AskKind(enum.StrEnum):
    QUESTION = "question"  # answered with text (`looop answer`)
    APPROVAL = "approval"  # a held move or round action: `looop approve` or `looop deny`

    @classmethod
    def parse(cls, value: Any) -> AskKind:
        """An unknown kind on disk reads as an approval: it never runs without a verdict."""
        try:
            return cls(value)
        except ValueError:
            return cls.APPROVAL


class AskError(LooopError):
    """An ask that cannot be answered as requested."""


@dataclass(frozen=True)
class Ask:
    id: str
    kind: AskKind
    prompt: str
    asker: str  # a worker session id, "decider", "human" or "loop:<name>"
    created_at: float
    options: tuple[str, ...] = ()
    ref: str | None = None
    hold: dict[str, Any] = field(default_factory=dict)  # approval: the move or round held back
    waiter: dict[str, Any] = field(default_factory=dict)  # {pid, create_time} of `looop ask`
    expired_at: float | None = None  # when the waiting `looop ask` gave up (its --timeout)
    host: str | None = None  # the host it was filed on, when the mailbox is shared
    stranded: str | None = None  # shared mailbox: why its own host found its asker gone

    def to_json(self) -> dict[str, Any]:
        return {
            "v": 1,
            "id": self.id,
            "kind": self.kind,
            "prompt": self.prompt,
            "asker": self.asker,
            "created_at": self.created_at,
            "options": list(self.options),
            "ref": self.ref,
            "hold": self.hold,
            **({"waiter": self.waiter} if self.waiter else {}),
            **({"expired_at": self.expired_at} if self.expired_at is not None else {}),
            **({"host": self.host} if self.host else {}),
            **({"stranded": self.stranded} if self.stranded else {}),
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Ask:
        return Ask(
            id=str(data["id"]),
            kind=AskKind.parse(data.get("kind", "question")),
            prompt=str(data.get("prompt", "")),
            asker=str(data.get("asker", "?")),
            created_at=float(data.get("created_at", 0)),
            options=tuple(data.get("options") or ()),
            ref=data.get("ref"),
            hold=dict(data.get("hold") or {}),
            waiter=data["waiter"] if isinstance(data.get("waiter"), dict) else {},
            expired_at=jsonio.number(data.get("expired_at")),
            host=data["host"] if isinstance(data.get("host"), str) else None,
            stranded=data["stranded"] if isinstance(data.get("stranded"), str) else None,
        )


@dataclass(frozen=True)
class Answer:
    text: str
    answered_at: float
    verdict: str | None = None  # approvals: approved | denied
    note: str | None = None  # what happened when an approved move ran, or why denied


def _next_index(box: shelf.Shelf, prefix: str) -> int:
    highest = 0
    for kind in ("asks", "answers"):
        for name in box.names(kind):
            head, _, tail = name.rpartition("-")
            if head == prefix and tail.isdigit():
                highest = max(highest, int(tail))
    return highest + 1


def open_ask(
    wd: WorkDir,
    *,
    prompt: str,
    asker: str,
    now: float,
    kind: AskKind = AskKind.QUESTION,
    options: tuple[str, ...] = (),
    ref: str | None = None,
    hold: dict[str, Any] | None = None,
    waiting: bool = False,
) -> Ask:
    """File a new ask with the next free id `<asker>-<n>`; `waiting`: this process will wait
    for the answer, and the ask says so from the start (a waiter killed at any moment after
    leaves a stranded ask, never one that looks awaited)."""
    if not prompt.strip():
        raise UsageError("an ask needs a prompt", "pass --prompt TEXT")
    prefix = check_segment(asker.replace(":", "-"), "asker")
    box = wd.shelf
    for _ in range(50):  # lose a race for an id → take the next one
        ask = Ask(
            id=f"{prefix}-{_next_index(box, prefix)}",
            kind=kind,
            prompt=prompt,
            asker=asker,
            created_at=now,
            options=options,
            ref=ref,
            hold=hold or {},
            host=box.host if box.shared else None,
            waiter=_me() if waiting else {},
        )
        if box.create("asks", ask.id, shelf.dumps(ask.to_json())):
            return ask
    raise AskError("could not allocate an ask id after 50 tries", "try again")


def get_ask(wd: WorkDir, ask_id: str) -> Ask:
    check_segment(ask_id, "ask id")
    data = shelf.read_json(wd.shelf, "asks", ask_id)
    if not isinstance(data, dict):
        raise UsageError(f"no ask {ask_id!r}", "list pending asks with `looop asks`")
    return Ask.from_json(data)


def get_answer(wd: WorkDir, ask_id: str) -> Answer | None:
    check_segment(ask_id, "ask id")
    try:
        data = shelf.read_json(wd.shelf, "answers", ask_id)
    except CorruptFile:  # not Unavailable: etcd out of reach says so itself
        raise AskError(
            f"the answer to {ask_id} is corrupt",
            f"re-answer it: looop answer {ask_id} --force TEXT",
        ) from None
    if not isinstance(data, dict):
        return None
    return Answer(
        text=str(data.get("answer", "")),
        answered_at=float(data.get("answered_at", 0)),
        verdict=data.get("verdict"),
        note=data.get("note"),
    )


def checked_answer(wd: WorkDir, ask_id: str, *, now: float) -> Answer | None:
    """The answer to act on: None while there is none, or when the one there is was not
    written by looop for exactly this ask (it is then refused as a forgery, here)."""
    check_segment(ask_id, "ask id")
    raw = wd.shelf.get("answers", ask_id)
    if raw is None:
        return None
    try:
        data = jsonio.loads(raw)
    except (ValueError, UnicodeDecodeError):
        data = None
    try:
        ask: dict[str, Any] | None = get_ask(wd, ask_id).to_json()
    except LooopError:
        ask = None
    why = forged.reason(ask, data)
    if why is not None:
        forged.refuse(wd, ask_id, raw, why, now)
        return None
    assert isinstance(data, dict)
    return Answer(
        text=str(data.get("answer", "")),
        answered_at=float(data.get("answered_at", 0)),
        verdict=data.get("verdict"),
        note=data.get("note"),
    )


def answer(
    wd: WorkDir,
    ask_id: str,
    text: str,
    *,
    now: float,
    verdict: str | None = None,
    note: str | None = None,
    force: bool = False,
    by: str | None = None,
    unverified: bool = False,
) -> Answer:
    """Answer an ask exactly once (or again with force), sealed to it.

    `by`: where the answer came from (cli, page, api); the record keeps it and who
    answered (this process's user); an answer forced over another without `by` keeps
    the first one's. `unverified`: a round's proposal its checker did not verify is
    approved anyway (`looop approve --unverified`), and the sealed record says so. A
    question's answer writes a journal line (an approval's verdict is journaled by
    moves/approvals.py, with what ran). A forged answer in the way is refused first."""
    ask = get_ask(wd, ask_id)
    if not force:
        checked_answer(wd, ask_id, now=now)
    if ask.kind is AskKind.APPROVAL and verdict is None:
        raise UsageError(
            f"{ask_id} is an approval, not a question",
            f"use `looop approve {ask_id}` or `looop deny {ask_id}`",
        )
    if ask.options and verdict is None and text not in ask.options:
        raise UsageError(f"{ask_id} asks for one of: {', '.join(ask.options)}")
    record: dict[str, Any] = {
        "v": 1,
        "answer": text,
        "answered_at": now,
        "verdict": verdict,
        "note": note,
    }
    box = wd.shelf
    if box.shared:
        record["host"] = box.host
    if unverified:
        record["unverified"] = True
    if by is not None:
        record.update(by=by, who=_user())
    elif force:
        with contextlib.suppress(LooopError):
            first = shelf.read_json(box, "answers", ask_id)
            if isinstance(first, dict) and seal.check_answer(ask.to_json(), first) is None:
                record.update({k: first[k] for k in ("by", "who", "unverified") if k in first})
    record["seal"] = seal.answer_seal(ask.to_json(), record)
    data = shelf.dumps(record)
    if force:
        box.put("answers", ask_id, data)
    elif not box.create("answers", ask_id, data):
        raise UsageError(f"{ask_id} is already answered", "pass --force to replace the answer")
    if verdict is None:  # the answer stands even where no journal can be written
        where = f" from the {by}" if by else ""
        with contextlib.suppress(OSError):
            journal.write(wd, f"✓ answered {ask_id}{where}: {text}", now)
    return Answer(text, now, verdict, note)


def _user() -> str:
    import pwd  # only when a human answers

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def pending(wd: WorkDir) -> list[Ask]:
    """Asks without an answer, oldest first."""
    box = wd.shelf
    if box.empty("asks"):
        return []
    answered = set(box.names("answers"))
    out: list[Ask] = []
    for _name, data in _unanswered(box, answered):
        if isinstance(data, dict):
            with contextlib.suppress(KeyError, TypeError, ValueError):
                out.append(Ask.from_json(data))
    out.sort(key=lambda a: (a.created_at, a.id))
    return out


def _unanswered(box: shelf.Shelf, answered: set[str]) -> list[tuple[str, Any]]:
    """The asks not in `answered`, parsed (unreadable: None). On files only they are read,
    never the answered history (a shared shelf reads all in one request, not one each)."""
    if box.shared:
        return [(n, d) for n, d in shelf.json_items(box, "asks") if n not in answered]
    out: list[tuple[str, Any]] = []
    for name in (n for n in box.names("asks") if n not in answered):
        try:
            out.append((name, shelf.read_json(box, "asks", name)))
        except CorruptFile:
            out.append((name, None))
    return out


def wait(wd: WorkDir, ask_id: str, *, timeout_s: float | None = None) -> Answer:
    """Block until the ask is answered; the ask vanishing or being withdrawn is an error.

    The waiting process is recorded in the ask (so a listing can tell when it is
    gone: the ask is stranded), unless it was filed `waiting`; so is a timeout (the ask
    is expired).
    """
    if get_ask(wd, ask_id).waiter != _me():
        _update(wd, ask_id, waiter=_me())
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    with shelf.Pause(wd.shelf, ("asks", "answers"), poll_s=POLL_S) as pause:  # etcd: a watch
        while True:
            got = checked_answer(wd, ask_id, now=time.time())
            if got is not None:
                if got.verdict == WITHDRAWN:
                    raise AskError(
                        f"ask {ask_id} was withdrawn" + (f": {got.note}" if got.note else "")
                    )
                return got
            if wd.shelf.get("asks", ask_id) is None:
                raise NoAnswer(f"ask {ask_id} was removed before it was answered")
            if deadline is not None and time.monotonic() >= deadline:
                _update(wd, ask_id, expired_at=time.time())
                raise NoAnswer(
                    f"no answer to {ask_id} within {timeout_s:g}s",
                    f"it is listed as expired until answered or withdrawn (withdraw {ask_id})",
                )
            pause.sleep(deadline)


def _me() -> dict[str, Any]:
    return {"pid": os.getpid(), "create_time": create_time(os.getpid())}


def _update(wd: WorkDir, ask_id: str, **fields: Any) -> None:
    """Add fields to an ask's record (atomically); a missing or damaged ask is left alone."""
    box = wd.shelf
    try:
        data = shelf.read_json(box, "asks", check_segment(ask_id, "ask id"))
    except LooopError:
        return
    if isinstance(data, dict):
        with contextlib.suppress(OSError):
            box.put("asks", ask_id, shelf.dumps({**data, **fields}))


# -- what became of an ask nobody answered ---------------------------------------------

WITHDRAWN = "withdrawn"  # the verdict of an answer that withdraws an ask


class AskState(enum.StrEnum):
    PENDING = "pending"  # someone waits (or may still wait) for the answer
    STRANDED = "stranded"  # whoever asked is gone: an answer would reach no one
    EXPIRED = "expired"  # the asker stopped waiting: its --timeout passed


@dataclass(frozen=True)
class AskView:
    """An unanswered ask and what became of it."""

    ask: Ask
    state: AskState
    why: str | None = None

    @property
    def id(self) -> str:
        return self.ask.id

    def to_json(self) -> dict[str, Any]:
        return {**self.ask.to_json(), "state": self.state.value, "why": self.why}


def state_of(wd: WorkDir, ask: Ask) -> tuple[AskState, str | None]:
    """Expired when its waiting `looop ask` timed out; stranded when that process, or the
    worker that asked, is gone; else pending. Asks from the decider, a loop or a human
    at a prompt wait for a human and stay pending."""
    if ask.expired_at is not None:
        return AskState.EXPIRED, "the asker stopped waiting (its --timeout passed)"
    if ask.stranded is not None:
        return AskState.STRANDED, ask.stranded  # as its host found it (a shared mailbox)
    if ask.host is not None and ask.host != wd.shelf.host:
        return AskState.PENDING, None  # its asker runs on another host: only that host can tell
    pid, created = ask.waiter.get("pid"), ask.waiter.get("create_time")
    if isinstance(pid, int) and isinstance(created, int | float) and not is_alive(pid, created):
        return AskState.STRANDED, f"the `looop ask` that waited (pid {pid}) is gone"
    session = wd.paths.sessions / ask.asker
    if ask.asker not in ("human", "decider") and is_safe_segment(ask.asker) and session.is_dir():
        try:
            meta = jsonio.read_json(session / "meta.json", {})
        except LooopError:
            meta = {}
        pid = meta.get("pid") if isinstance(meta, dict) else None
        if isinstance(pid, int) and not is_alive(pid, meta.get("create_time")):
            return AskState.STRANDED, f"its worker {ask.asker} is not running"
    return AskState.PENDING, None


def listing(wd: WorkDir, *, record: bool = False) -> list[AskView]:
    """Every unanswered ask, oldest first, with its state (pending, stranded, expired).

    With `record` (a beat), on a shared mailbox, an ask this host finds stranded is marked
    so in its record: every host then shows the same state, and the world the hosts
    share does not change with the host that happens to beat.
    """
    views = [AskView(a, *state_of(wd, a)) for a in pending(wd)]
    if record and wd.shelf.shared:
        for v in views:
            if v.state is AskState.STRANDED and v.ask.stranded is None:
                _update(wd, v.id, stranded=v.why)
    return views


def withdraw(wd: WorkDir, ask_id: str, *, now: float, reason: str | None = None) -> Answer:
    """Withdraw an unanswered ask: it leaves the listing; a `looop ask` still waiting on
    it fails (exit 1); an approval withdrawn is never run (a loop round reads it as denied).

    (The `looop withdraw ID` command calls this.)
    """
    ask = get_ask(wd, ask_id)  # a missing ask is a UsageError
    checked_answer(wd, ask_id, now=now)  # a forged answer in the way is refused first
    record: dict[str, Any] = {
        "v": 1,
        "answer": "",
        "answered_at": now,
        "verdict": WITHDRAWN,
        "note": reason or "withdrawn",
    }
    record["seal"] = seal.answer_seal(ask.to_json(), record)
    if not wd.shelf.create("answers", ask_id, shelf.dumps(record)):
        raise UsageError(f"{ask_id} is already answered", "see `looop asks`")
    with contextlib.suppress(OSError):
        journal.write(wd, f"✗ withdrew {ask_id}: {reason or 'withdrawn'}", now)
    return Answer("", now, WITHDRAWN, reason or "withdrawn")
