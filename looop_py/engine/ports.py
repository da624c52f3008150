"""The data a round exchanges with the rest of looop: workers, the mailbox, memory.

These are plain frozen records; the interfaces that carry them are in
protocols.py. Each converts to and from a JSON-ready dict, because a round is
persisted between beats and so is everything it has heard back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class BudgetSpent(Exception):
    """Raised by WorkerRunner.start when the daily budget allows no more work: the
    round ends budget-exhausted, with the message as its reason, never failed."""


class WorkerStatus(enum.Enum):
    """How a worker ended. Only DONE counts as verified when the checker reports it."""

    DONE = "done"
    DONE_WITH_CONCERNS = "done-with-concerns"
    BLOCKED = "blocked"
    FAILED = "failed"

    @classmethod
    def parse(cls, text: str | WorkerStatus) -> WorkerStatus:
        if isinstance(text, WorkerStatus):
            return text
        key = str(text).strip().lower().replace("_", "-")
        try:
            return cls(key)
        except ValueError:
            raise ValueError(
                f"unknown worker status {text!r} (done, done-with-concerns, blocked, failed)"
            ) from None

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class WorkerRequest:
    """Everything a runner needs to start a maker or a checker.

    `id` is stable for the round and role (`<round>.maker`): a runner asked to
    start an id it already started returns the same handle instead of a second
    worker, so a round resumed after a crash never runs its maker twice.
    """

    id: str
    name: str  # "<loop>:maker" / "<loop>:checker", for logs and session lists
    kind: str  # maker | checker
    loop: str
    round_id: str
    prompt: str
    read_only: bool  # L1: the runtime's read-only mode, on top of the instruction
    workspace: str | None
    runtime: str | None
    max_iters: int


@dataclass(frozen=True)
class WorkerResult:
    status: WorkerStatus
    text: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    iters: int | None = None
    # tokens a worker reported only as a total (`looop done --tokens`): they count toward
    # the total ceiling, never toward input or output
    unsplit_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "text": self.text,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "iters": self.iters,
            "unsplit_tokens": self.unsplit_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkerResult:
        iters = data.get("iters")
        text = data.get("text")
        return cls(
            WorkerStatus.parse(data["status"]),
            None if text is None else str(text),
            int(data.get("input_tokens") or 0),
            int(data.get("output_tokens") or 0),
            None if iters is None else int(iters),
            int(data.get("unsplit_tokens") or 0),
        )

    @property
    def has_text(self) -> bool:
        return bool(self.text and self.text.strip())


class Approval(enum.Enum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"


@dataclass(frozen=True)
class Answer:
    """A human's answer to an approval ask, as far as there is one yet."""

    state: Approval
    note: str | None = None  # the person's words, if any (a denial's reason)

    @classmethod
    def pending(cls) -> Answer:
        return cls(Approval.PENDING)


@dataclass(frozen=True)
class ApprovalRequest:
    """An escalated proposal, put to a human. `key` is stable: opening it twice is one ask."""

    key: str
    loop: str
    round_id: str
    level: str
    kind: str
    summary: str
    verified: bool
    reason: str
    question: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "loop": self.loop,
            "round_id": self.round_id,
            "level": self.level,
            "kind": self.kind,
            "summary": self.summary,
            "verified": self.verified,
            "reason": self.reason,
            "question": self.question,
        }


@dataclass(frozen=True)
class MemoryEntry:
    """One line of a loop's state spine, memory/<loop>.jsonl.

    `id` is derived from what the entry says and when (its content, source, round and
    time), so an entry has the same id on every read, every host and after a restart,
    including lines written before entries carried one. `expires` is when it stops
    being recalled (None: never); expired entries are pruned when the loop records.
    """

    content: str
    tags: tuple[str, ...] = ()
    source: str | None = None
    created: float = 0.0
    round_id: str | None = None
    outcome: str | None = None
    expires: float | None = None
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", self.derived_id())

    def derived_id(self) -> str:
        import hashlib  # only for an entry that has no stored id yet

        key = "\0".join(
            (self.content, self.source or "", self.round_id or "", repr(float(self.created)))
        )
        return "m-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def is_expired(self, now: float) -> bool:
        return self.expires is not None and now >= self.expires

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "content": self.content,
            "tags": list(self.tags),
            "source": self.source,
            "created": self.created,
            "expires": self.expires,
            "round": self.round_id,
            "outcome": self.outcome,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryEntry:
        tags = data.get("tags") or ()
        raw = data.get("expires")
        expires: float | None = None
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            import math  # only where an entry carries an expiry

            expires = None if math.isnan(raw) else float(raw)
        stored_id = data.get("id")
        return cls(
            content=str(data.get("content", "")),
            tags=tuple(str(t) for t in tags) if isinstance(tags, list | tuple) else (),
            source=data.get("source"),
            created=float(data.get("created") or 0.0),
            round_id=data.get("round"),
            outcome=data.get("outcome"),
            expires=expires,
            id=stored_id if isinstance(stored_id, str) else "",
        )
