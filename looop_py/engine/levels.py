"""Maturity levels and the gate that decides whether a proposal may proceed on its own.

A loop earns autonomy in three steps: L1 only reports, L2 may change its
workspace but a human approves every action, L3 may act alone on verified,
allowlisted work. The gates here express a policy; the round itself adds the
floor no gate can lower (see rounds.py): nothing proceeds without a human below
L3 or on work the checker did not verify, and L1 never acts at all.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from looop_py.errors import UsageError

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class LoopLevel(enum.Enum):
    L1_REPORT = "l1-report"
    L2_ASSISTED = "l2-assisted"
    L3_UNATTENDED = "l3-unattended"

    @property
    def label(self) -> str:
        """The name people read and write: `L1-report`, `L2-assisted`, `L3-unattended`."""
        return "L" + self.value[1:]

    @property
    def maker_may_write(self) -> bool:
        return self is not LoopLevel.L1_REPORT

    @property
    def rank(self) -> int:
        return int(self.value[1])

    @classmethod
    def parse(cls, text: str | LoopLevel) -> LoopLevel:
        """Accepts `L1-report`, `l1-report`, `L1`, `1`, `report`, `L1_REPORT`, in any case."""
        if isinstance(text, LoopLevel):
            return text
        key = str(text).strip().lower().replace("_", "-")
        for level in cls:
            short, _, word = level.value.partition("-")
            if key in (level.value, short, short[1:], word):
                return level
        raise UsageError(
            f"unknown loop level {text!r}",
            "use L1-report, L2-assisted or L3-unattended (or L1, L2, L3)",
        )

    def __str__(self) -> str:
        return self.label


@dataclass(frozen=True)
class ProposedAction:
    """What a round would do once its work is done: the gate judges this."""

    kind: str  # the stable name a gate matches: "commit", "open-pr", "comment", "report" …
    summary: str  # what a human reads
    verified: bool  # the checker finished with status `done`

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary, "verified": self.verified}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProposedAction:
        return cls(str(data["kind"]), str(data["summary"]), bool(data["verified"]))


@dataclass(frozen=True)
class GateDecision:
    """Either proceed on its own (`auto`) or escalate to a human, with the reason why."""

    auto: bool
    reason: str | None = None

    @classmethod
    def auto_proceed(cls) -> GateDecision:
        return cls(True, None)

    @classmethod
    def escalate(cls, reason: str) -> GateDecision:
        return cls(False, reason)

    @property
    def is_auto(self) -> bool:
        return self.auto

    def to_dict(self) -> dict[str, Any]:
        return {"auto": self.auto, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateDecision:
        reason = data.get("reason")
        return cls(bool(data["auto"]), None if reason is None else str(reason))

    def __str__(self) -> str:
        return "auto-proceed" if self.auto else f"escalate: {self.reason}"


class AlwaysEscalate:
    """Every proposal goes to a human. The default gate at every level."""

    def decide(self, level: LoopLevel, action: ProposedAction) -> GateDecision:
        return GateDecision.escalate("a human reviews every proposal of this loop")

    def __repr__(self) -> str:
        return "AlwaysEscalate()"


class AllowlistGate:
    """Proceeds alone only at L3, only on verified work, only for allowlisted kinds.

    The rules are tried in that order and the first that refuses gives the
    reason. Kinds match exactly (case-sensitive): `commit` does not allow `Commit`.
    """

    def __init__(self, allow_kinds: Iterable[str]) -> None:
        if isinstance(allow_kinds, str):
            allow_kinds = [allow_kinds]  # a lone string is one kind, not its letters
        self.allow_kinds: tuple[str, ...] = tuple(allow_kinds)

    def decide(self, level: LoopLevel, action: ProposedAction) -> GateDecision:
        if level is not LoopLevel.L3_UNATTENDED:
            return GateDecision.escalate(
                f"the allowlist gate acts alone only at L3-unattended, not {level.label}"
            )
        if not action.verified:
            return GateDecision.escalate("the checker did not verify the work")
        if action.kind in self.allow_kinds:
            return GateDecision.auto_proceed()
        return GateDecision.escalate(f"action kind `{action.kind}` is not on the allowlist")

    def __repr__(self) -> str:
        return f"AllowlistGate({list(self.allow_kinds)!r})"


class CallbackGate:
    """A gate that is any function `(level, action) -> GateDecision`.

    For custom policies (time of day, spend so far, deny-lists). It may say
    auto-proceed for anything; the round still refuses to act alone below L3 or
    on unverified work.
    """

    def __init__(self, fn: Callable[[LoopLevel, ProposedAction], GateDecision]) -> None:
        self.fn = fn

    def decide(self, level: LoopLevel, action: ProposedAction) -> GateDecision:
        return self.fn(level, action)


def default_gate_for(level: LoopLevel) -> AlwaysEscalate:
    """AlwaysEscalate at every level: acting alone needs an explicit allowlist."""
    return AlwaysEscalate()


def gate_for_allowlist(allow: Iterable[str]) -> AllowlistGate | AlwaysEscalate:
    """The gate a loop's `allow:` list implies: an AllowlistGate, or AlwaysEscalate if empty."""
    kinds = tuple(allow)
    return AllowlistGate(kinds) if kinds else AlwaysEscalate()
