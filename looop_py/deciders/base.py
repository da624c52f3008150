"""The Decider protocol: a world goes in, one proposed move comes out.

A decider only proposes. Validation and execution belong to looop
(looop_py/moves/), never to the backend. A request carries what a backend may
use — the prompt, the world, the goals as they were hashed, a directory for its
own state and the environment for a child process — not the whole work dir.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from typing import Any, Protocol

from looop_py.errors import LooopError
from looop_py.records import record
from looop_py.workdir.environ import decider_env
from looop_py.workdir.goalfile import GoalFile
from looop_py.workdir.paths import Paths
from looop_py.world import Change


class DecideError(LooopError):
    """The backend failed to produce a usable answer (timeout, HTTP error, garbage).

    A backend raises one of the subclasses below, typed where it sees the failure (an
    HTTP status, a CLI's exit code or own words, a reply it reads): whoever retries reads
    the type, never the message.
    """

    raw: str = ""  # what the backend did return, if anything, for the runs/ archive
    # What the failed call(s) reported spending: the provider billed them whatever the
    # reply, so the beat charges this to the ledger too (None: nothing reported).
    usage: Usage | None = None


class PermanentError(DecideError):
    """Retrying this call cannot fix it: a bad key or request (HTTP 400/401/403/404),
    a server that cannot be reached at all, a CLI that failed for a reason it did not
    name as temporary."""


class InvalidReply(PermanentError):
    """The backend answered, but not with one usable move (prose, two objects, bad JSON,
    a refusal, a reply cut at max_tokens). The call was made: asking again in the same
    beat would pay again for the same prompt."""


class TemporaryError(DecideError):
    """A later attempt may succeed: HTTP 408, 429 or 5xx, a dropped connection, a model
    the provider (or the CLI) calls overloaded. `delay`: the seconds the provider asked
    to wait (Retry-After), None when it did not say."""

    def __init__(self, message: str, hint: str | None = None, *, delay: float | None = None):
        super().__init__(message, hint)
        self.delay = delay


class TimedOut(TemporaryError):
    """No answer within `timeout_s`. A later beat may get one, but the call is not retried
    within this one: it already held the pulse lock for the whole timeout."""


def temporary_status(status: int) -> bool:
    """Whether an HTTP error status says a later attempt may succeed (408, 429, 5xx)."""
    return status in (408, 429) or 500 <= status <= 599


# eq=True: tests compare them; a @record (records.py): frozen to mypy, cheap at import.
@record(eq=True)
class Usage:
    """What one decide call used, as the backend reported it (tokens, cost)."""

    input_tokens: int = 0  # every prompt token, those served from or written to a cache too
    output_tokens: int = 0
    cost_usd: float | None = None
    cache_read_tokens: int = 0  # of input_tokens: read from the provider's prompt cache
    cache_write_tokens: int = 0  # of input_tokens: written to it (Anthropic charges extra)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def add_usage(a: Usage | None, b: Usage | None) -> Usage | None:
    """Two calls' usage as one (a decide's attempts); a cost only one of them reported is kept,
    None only when neither reported any usage."""
    if a is None or b is None:
        return a if b is None else b
    costs = [c for c in (a.cost_usd, b.cost_usd) if c is not None]
    cost = sum(costs) if costs else None
    return Usage(
        a.input_tokens + b.input_tokens,
        a.output_tokens + b.output_tokens,
        cost,
        a.cache_read_tokens + b.cache_read_tokens,
        a.cache_write_tokens + b.cache_write_tokens,
    )


# @record: nothing compares records like these (identity) or assigns to them (mypy); each
# generated method is a full beat's fixed cost at import (records.py). repr=False: a repr
# would print the whole prompt and the child environment.
@record(repr=False)
class DecideRequest:
    """Everything a backend may look at to pick one move."""

    now: float
    workdir: Path  # where a command backend runs
    state_dir: Path  # where a backend may keep state of its own (a cursor, a queue)
    env: Mapping[str, str]  # the environment a child process gets (LOOOP_DIR, LOOOP_BIN …)
    items: Mapping[str, str] = field(default_factory=dict)
    changed: tuple[Change, ...] = ()
    snapshots: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # stem → snapshot
    goals: tuple[GoalFile, ...] = ()  # the goal files exactly as this beat hashed them
    live_workers: frozenset[str] = frozenset()  # workers starting or running now
    last_acted: Mapping[str, float | None] = field(default_factory=dict)  # goal id → last move
    forced: bool = False
    # The full decide prompt (deciders/prompt.py); LLM backends send only this. "" for a
    # backend that says it reads none (`reads_prompt`): the beat did not build it.
    prompt: str = ""


# Where the decide prompt (deciders/prompt.py) turns more volatile: it puts these section
# headers at the ends of its stable parts, so a provider can cache up to each of them.
CACHE_CUTS = ("=== SENSOR READINGS", "=== WHAT CHANGED")


def prompt_blocks(prompt: str) -> list[str]:
    """The prompt in parts for cache markers: policy (instructions … goals), the readings
    that did not change, and the volatile rest. Joined, they are the prompt."""
    parts: list[str] = []
    rest = prompt
    for header in CACHE_CUTS:
        at = rest.find("\n" + header)
        if at < 0:
            continue
        parts.append(rest[: at + 1])
        rest = rest[at + 1 :]
    return [*parts, rest]


def request_in(paths: Paths, now: float, **fields: Any) -> DecideRequest:
    """A request for a backend working in this work dir."""
    return DecideRequest(now, paths.root, paths.state, decider_env(paths), **fields)


@record
class Decision:
    """A backend's answer: the move as decoded JSON, the raw text, the usage."""

    move: Any  # the parsed JSON value; moves.parse decides whether it is a move
    raw: str = ""  # what the backend returned, archived in runs/<id>/
    usage: Usage | None = None  # None: the backend reported no usage (unmetered)
    meta: Mapping[str, Any] = field(default_factory=dict)


class Decider(Protocol):
    name: str
    # Whether decide() reads `request.prompt`. False (rules, noop): the beat builds no
    # prompt for it and writes no runs/<id>/prompt.md (at 10,000 goals a prompt reads
    # ~4,000 goal files and fills 256 KiB); the goals, snapshots and changes still come.
    reads_prompt: bool

    def decide(self, request: DecideRequest) -> Decision: ...


def reads_prompt(backend: Decider) -> bool:
    """Whether the beat builds the prompt for this backend: a backend that does not say
    gets one (the safe side: nothing it may read is left out)."""
    return getattr(backend, "reads_prompt", True) is not False
