"""The Decider protocol: a world goes in, one proposed move comes out.

A decider only proposes. Validation and execution belong to looop
(moves.py, actions.py), never to the backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from looop_py.beat.worldhash import Change
from looop_py.errors import LooopError
from looop_py.workdir.paths import Paths


class DecideError(LooopError):
    """The backend failed to produce a usable answer (timeout, HTTP error, garbage)."""

    raw: str = ""  # what the backend did return, if anything, for the runs/ archive


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class DecideRequest:
    paths: Paths
    now: float
    items: Mapping[str, str]
    changed: tuple[Change, ...]
    snapshots: Mapping[str, Mapping[str, Any]]  # stem → {signal, detail}
    forced: bool = False
    prompt: str = ""  # the full decide prompt (prompt.py); LLM backends send only this


@dataclass(frozen=True)
class Decision:
    move: Any  # the parsed JSON value; moves.parse decides whether it is a move
    raw: str = ""  # what the backend returned, archived in runs/<id>/
    usage: Usage | None = None  # None: the backend reported no usage (unmetered)
    meta: Mapping[str, Any] = field(default_factory=dict)


class Decider(Protocol):
    name: str

    def decide(self, request: DecideRequest) -> Decision: ...
