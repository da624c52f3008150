"""One finding of `looop doctor`: a named check, its verdict, what it saw and how to fix it."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Verdict(enum.StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but not as the user probably wants it
    FAIL = "fail"  # broken: doctor exits 1


@dataclass(frozen=True)
class Check:
    name: str
    verdict: Verdict
    message: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "message": self.message,
            "fix": self.fix,
        }
