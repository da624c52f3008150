"""`looop decider test`: one tiny decide through the configured backend, nothing executed."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from looop_py.deciders import load
from looop_py.deciders.base import DecideError, Usage, request_in
from looop_py.moves import union
from looop_py.workdir.context import WorkDir

TEST_PROMPT = """\
This is a connectivity check from `looop decider test`: nothing you propose will run.
Reply with exactly one JSON object and nothing else. It must be this looop move:
{"action": "noop", "reason": "decider test"}
"""


@dataclass(frozen=True)
class DeciderCheck:
    """What `looop decider test` found: the backend's move, whether it is valid, its cost."""

    backend: str
    ms: int
    move: Any = None
    invalid: str | None = None  # why the move is not a valid looop move
    error: str | None = None  # the backend failed to answer
    hint: str | None = None
    usage: Usage | None = None  # None: the backend reported none (unmetered)
    meta: dict[str, Any] = field(default_factory=dict)
    raw: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None and self.invalid is None

    def to_json(self) -> dict[str, Any]:
        usage = None
        if self.usage is not None:
            usage = {**asdict(self.usage), "total_tokens": self.usage.total_tokens}
        return {
            "backend": self.backend,
            "ok": self.ok,
            "move": self.move,
            "invalid": self.invalid,
            "error": self.error,
            "hint": self.hint,
            "usage": usage,
            "ms": self.ms,
            "meta": self.meta,
            "raw": self.raw,
        }


def run_test(wd: WorkDir, now: float) -> DeciderCheck:
    cfg = wd.config
    backend = load(cfg)
    request = request_in(wd.paths, now, forced=True, prompt=TEST_PROMPT)
    started = time.monotonic()
    try:
        decision = backend.decide(request)
    except DecideError as exc:
        ms = round((time.monotonic() - started) * 1000)
        return DeciderCheck(
            cfg.decider.backend, ms, error=exc.message, hint=exc.hint, raw=exc.raw[:2000]
        )
    ms = round((time.monotonic() - started) * 1000)
    try:
        union.parse(decision.move)
        invalid = None
    except union.MoveError as exc:
        invalid = exc.message
    return DeciderCheck(
        cfg.decider.backend,
        ms,
        move=decision.move,
        invalid=invalid,
        usage=decision.usage,
        meta=dict(decision.meta),
        raw=decision.raw[:2000],
    )
