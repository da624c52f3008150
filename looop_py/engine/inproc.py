"""In-process implementations of the engine's protocols.

They make a LoopEngine usable on its own (a function as the worker, claims and
approvals held in memory) and are the fakes the tests drive rounds with. The
lead wires looop's real workers, claims and mailbox in their place.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from looop_py.engine.ports import (
    Answer,
    Approval,
    ApprovalRequest,
    MemoryEntry,
    WorkerRequest,
    WorkerResult,
    WorkerStatus,
)
from looop_py.engine.spec import LoopSpec

WorkerFn = Callable[[WorkerRequest], WorkerResult]


class InProcessWorkers:
    """Workers that are plain functions, `request -> WorkerResult`.

    `polls` is how many polls report "still running" before the result shows,
    to exercise rounds that span several beats. An exception in the function
    becomes a `failed` result, as a crashed worker would.
    """

    def __init__(self, fn: WorkerFn, *, polls: int = 0) -> None:
        self.fn = fn
        self.polls = polls
        self.requests: list[WorkerRequest] = []
        self.cancelled: list[str] = []
        self._results: dict[str, WorkerResult | None] = {}
        self._waits: dict[str, int] = {}

    def start(self, request: WorkerRequest) -> str:
        if request.id in self._results:
            return request.id  # started before: the same worker, not a second one
        self.requests.append(request)
        try:
            result: WorkerResult | None = self.fn(request)
        except Exception as exc:
            result = WorkerResult(WorkerStatus.FAILED, f"{type(exc).__name__}: {exc}")
        self._results[request.id] = result
        self._waits[request.id] = self.polls
        return request.id

    def poll(self, handle: str) -> WorkerResult | None:
        if handle in self.cancelled:
            return WorkerResult(WorkerStatus.FAILED, "cancelled")
        if handle not in self._results:
            return WorkerResult(WorkerStatus.FAILED, f"no worker {handle!r} (lost in a restart?)")
        if self._waits.get(handle, 0) > 0:
            self._waits[handle] -= 1
            return None
        return self._results[handle]

    def cancel(self, handle: str) -> None:
        if handle not in self.cancelled:
            self.cancelled.append(handle)

    def finish(self, handle: str, result: WorkerResult) -> None:
        """Set (or replace) a worker's result and let the next poll see it."""
        self._results[handle] = result
        self._waits[handle] = 0


class ScriptedWorkers(InProcessWorkers):
    """Hands out results in order, one per started worker: a maker, then a checker …"""

    def __init__(self, results: Iterable[WorkerResult], *, polls: int = 0) -> None:
        queue = list(results)

        def next_result(request: WorkerRequest) -> WorkerResult:
            if not queue:
                raise RuntimeError(f"no scripted result left for {request.name}")
            return queue.pop(0)

        super().__init__(next_result, polls=polls)


def done(text: str | None = None, input_tokens: int = 0, output_tokens: int = 0) -> WorkerResult:
    """Shorthand for a worker that finished cleanly."""
    return WorkerResult(WorkerStatus.DONE, text, input_tokens, output_tokens)


@dataclass
class InMemoryClaims:
    """Leases in a dict: re-entrant for the holder, refused to anyone else."""

    held: dict[str, tuple[str, int]] = field(default_factory=dict)
    _epochs: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def acquire(self, name: str, owner: str) -> int | None:
        holder = self.held.get(name)
        if holder is not None:
            return holder[1] if holder[0] == owner else None
        epoch = next(self._epochs)
        self.held[name] = (owner, epoch)
        return epoch

    def release(self, name: str, owner: str) -> None:
        holder = self.held.get(name)
        if holder is not None and holder[0] == owner:
            del self.held[name]


@dataclass
class InMemoryEscalations:
    """Approval asks kept in a dict; a test (or a person at a REPL) answers them.

    `auto` answers every new ask at once (approved or denied), for scripted runs.
    """

    auto: Approval | None = None
    asks: dict[str, ApprovalRequest] = field(default_factory=dict)
    answers: dict[str, Answer] = field(default_factory=dict)

    def open(self, request: ApprovalRequest) -> str:
        ask_id = request.key
        if ask_id not in self.asks:
            self.asks[ask_id] = request
            if self.auto is not None:
                self.answers[ask_id] = Answer(self.auto)
        return ask_id

    def poll(self, ask_id: str) -> Answer:
        return self.answers.get(ask_id, Answer.pending())

    def approve(self, ask_id: str, note: str | None = None) -> None:
        self.answers[ask_id] = Answer(Approval.APPROVED, note)

    def deny(self, ask_id: str, note: str | None = None) -> None:
        self.answers[ask_id] = Answer(Approval.DENIED, note)

    def pending(self) -> list[str]:
        return [a for a in self.asks if a not in self.answers]


@dataclass
class ListMemory:
    """Memory in a dict of lists; seed it with `ListMemory({"loop": [entry, …]})`.
    `clock` tells what is expired: pruned when a loop records, never recalled."""

    entries: dict[str, list[MemoryEntry]] = field(default_factory=dict)
    clock: Callable[[], float] = time.time

    def recall(self, loop: str | None, k: int, *, tag: str | None = None) -> list[MemoryEntry]:
        now = self.clock()
        pool = self.entries.get(loop, []) if loop is not None else _by_time(self.entries)
        found = [e for e in pool if not e.is_expired(now) and (tag is None or tag in e.tags)]
        return found[-k:] if k > 0 else []

    def record(self, loop: str, entry: MemoryEntry) -> None:
        kept = [e for e in self.entries.get(loop, []) if not e.is_expired(entry.created)]
        if entry.round_id is None or all(e.round_id != entry.round_id for e in kept):
            kept.append(entry)
        self.entries[loop] = kept


def _by_time(entries: dict[str, list[MemoryEntry]]) -> list[MemoryEntry]:
    return sorted((e for kept in entries.values() for e in kept), key=lambda e: e.created)


class NullMemory:
    """No state spine: nothing recalled, nothing kept."""

    def recall(self, loop: str | None, k: int, *, tag: str | None = None) -> list[MemoryEntry]:
        return []

    def record(self, loop: str, entry: MemoryEntry) -> None:
        return None


@dataclass
class SharedWorkspace:
    """Every round works in one directory, with no isolation (the reference's default)."""

    root: Path = field(default_factory=lambda: Path("."))
    released: list[tuple[str, str]] = field(default_factory=list)

    def prepare(self, round_id: str, spec: LoopSpec) -> str:
        return str(self.root)

    def release(self, round_id: str, workspace: str, outcome: str) -> None:
        self.released.append((round_id, outcome))
