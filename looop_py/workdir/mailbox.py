"""The human mailbox: asks/<id>.json waiting for answers/<id>.json.

An ask is a question (any worker, or the decider's `ask_human`) or an
approval (a move a gate held back, or a loop round's escalation). Asks and
answers are created exclusively (link(2) of a complete temp file), so two
writers can never both claim an id or both answer one ask, and a reader
never sees half a record.
"""

from __future__ import annotations

import contextlib
import enum
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import LooopError, NoAnswer, UsageError
from looop_py.ids import check_segment
from looop_py.workdir.paths import Paths

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
        )


@dataclass(frozen=True)
class Answer:
    text: str
    answered_at: float
    verdict: str | None = None  # approvals: approved | denied
    note: str | None = None  # what happened when an approved move ran, or why denied


def create_exclusive(path: Path, data: bytes) -> bool:
    """Write `path` only if it does not exist yet; False if it does. Never torn."""
    tmp = path.with_name(
        f".{path.name}.{os.getpid()}-{threading.get_native_id()}{jsonio.TMP_SUFFIX}"
    )
    jsonio.atomic_write(tmp, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return True


def _next_index(paths: Paths, prefix: str) -> int:
    highest = 0
    for directory in (paths.asks, paths.answers):
        with contextlib.suppress(FileNotFoundError), os.scandir(directory) as it:
            for entry in it:
                stem = entry.name.removesuffix(".json")
                head, _, tail = stem.rpartition("-")
                if head == prefix and tail.isdigit():
                    highest = max(highest, int(tail))
    return highest + 1


def open_ask(
    paths: Paths,
    *,
    prompt: str,
    asker: str,
    now: float,
    kind: AskKind = AskKind.QUESTION,
    options: tuple[str, ...] = (),
    ref: str | None = None,
    hold: dict[str, Any] | None = None,
) -> Ask:
    """File a new ask with the next free id `<asker>-<n>`."""
    if not prompt.strip():
        raise UsageError("an ask needs a prompt", "pass --prompt TEXT")
    prefix = check_segment(asker.replace(":", "-"), "asker")
    paths.asks.mkdir(exist_ok=True)
    for _ in range(50):  # lose a race for an id → take the next one
        ask = Ask(
            id=f"{prefix}-{_next_index(paths, prefix)}",
            kind=kind,
            prompt=prompt,
            asker=asker,
            created_at=now,
            options=options,
            ref=ref,
            hold=hold or {},
        )
        if create_exclusive(
            paths.asks / f"{ask.id}.json", jsonio.dumps(ask.to_json(), pretty=True)
        ):
            return ask
    raise AskError("could not allocate an ask id after 50 tries", "try again")


def get_ask(paths: Paths, ask_id: str) -> Ask:
    check_segment(ask_id, "ask id")
    data = jsonio.read_json(paths.asks / f"{ask_id}.json")
    if not isinstance(data, dict):
        raise UsageError(f"no ask {ask_id!r}", "list pending asks with `looop asks`")
    return Ask.from_json(data)


def get_answer(paths: Paths, ask_id: str) -> Answer | None:
    try:
        data = jsonio.read_json(paths.answers / f"{ask_id}.json")
    except LooopError:
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


def answer(
    paths: Paths,
    ask_id: str,
    text: str,
    *,
    now: float,
    verdict: str | None = None,
    note: str | None = None,
    force: bool = False,
) -> Answer:
    """Answer an ask exactly once (or again with force)."""
    ask = get_ask(paths, ask_id)
    if ask.kind is AskKind.APPROVAL and verdict is None:
        raise UsageError(
            f"{ask_id} is an approval, not a question",
            f"use `looop approve {ask_id}` or `looop deny {ask_id}`",
        )
    if ask.options and verdict is None and text not in ask.options:
        raise UsageError(f"{ask_id} asks for one of: {', '.join(ask.options)}")
    record = {"v": 1, "answer": text, "answered_at": now, "verdict": verdict, "note": note}
    path = paths.answers / f"{ask_id}.json"
    paths.answers.mkdir(exist_ok=True)
    data = jsonio.dumps(record, pretty=True)
    if force:
        jsonio.atomic_write(path, data)
    elif not create_exclusive(path, data):
        raise UsageError(f"{ask_id} is already answered", "pass --force to replace the answer")
    return Answer(text, now, verdict, note)


def pending(paths: Paths) -> list[Ask]:
    """Asks without an answer, oldest first."""
    try:
        answered = set(os.listdir(paths.answers))
    except FileNotFoundError:
        answered = set()
    out: list[Ask] = []
    for _, data in jsonio.json_files(paths.asks, skip=answered):
        if isinstance(data, dict):
            with contextlib.suppress(KeyError, TypeError, ValueError):
                out.append(Ask.from_json(data))
    out.sort(key=lambda a: (a.created_at, a.id))
    return out


def wait(paths: Paths, ask_id: str, *, timeout_s: float | None = None) -> Answer:
    """Block until the ask is answered; the ask vanishing is an error."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        got = get_answer(paths, ask_id)
        if got is not None:
            return got
        if not (paths.asks / f"{ask_id}.json").exists():
            raise NoAnswer(f"ask {ask_id} was removed before it was answered")
        if deadline is not None and time.monotonic() >= deadline:
            raise NoAnswer(f"no answer to {ask_id} within {timeout_s:g}s", "it stays pending")
        time.sleep(POLL_S)
