"""Per-round spend ceilings: tokens in, tokens out, their sum, iterations and wall time.

Unattended loops spend without bound unless something outside the model says
stop. Tokens are counted from the workers' own reports and checked after each
worker finishes (a worker is never cut off mid-answer for tokens); wall time is
checked on every step of the round, and overrunning it stops the round.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields, replace

from looop_py.errors import UsageError

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_MAX_ITERS = 12
# A round's wall-clock cap unless its budget says otherwise (`max_wall_s: null` for none):
# an agent stuck waiting, or looping below its iteration cap, is stopped within the hour.
DEFAULT_MAX_WALL_S = 3600.0


class BudgetError(UsageError):
    """A budget with a key or value that makes no sense."""


class BudgetLimit(enum.Enum):
    INPUT = "input-tokens"
    OUTPUT = "output-tokens"
    TOTAL = "total-tokens"
    WALL = "wall-clock"

    @property
    def label(self) -> str:
        return self.value

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TokenBudget:
    """A round's ceilings. None means no limit on that axis.

    `max_iters_per_round` is handed to each worker (maker and checker each get
    the full count; it is not shared): looop stops an agent CLI past that many tool
    calls, claude also gets --max-turns, a shell worker reads LOOOP_MAX_ITERS.
    `max_wall_s` defaults to DEFAULT_MAX_WALL_S.
    """

    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_iters_per_round: int = DEFAULT_MAX_ITERS
    max_wall_s: float | None = DEFAULT_MAX_WALL_S

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name != "max_iters_per_round":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise BudgetError(f"budget {f.name} should be a number, got {value!r}")
            if f.name != "max_wall_s" and not isinstance(value, int):
                raise BudgetError(f"budget {f.name} should be a whole number, got {value!r}")
            if value < 0 or (f.name in ("max_iters_per_round", "max_wall_s") and value == 0):
                raise BudgetError(f"budget {f.name} should be positive, got {value!r}")

    @classmethod
    def iters(cls, n: int) -> TokenBudget:
        """Only an iteration cap, no token ceilings."""
        return cls(max_iters_per_round=n)

    def with_max_input_tokens(self, n: int | None) -> TokenBudget:
        return replace(self, max_input_tokens=n)

    def with_max_output_tokens(self, n: int | None) -> TokenBudget:
        return replace(self, max_output_tokens=n)

    def with_max_total_tokens(self, n: int | None) -> TokenBudget:
        return replace(self, max_total_tokens=n)

    def with_max_iters_per_round(self, n: int) -> TokenBudget:
        return replace(self, max_iters_per_round=n)

    def with_max_wall_s(self, seconds: float | None) -> TokenBudget:
        return replace(self, max_wall_s=seconds)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> TokenBudget:
        """Missing keys take their defaults; an unknown key is an error naming it."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise BudgetError(f"a budget should be a mapping, got {data!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise BudgetError(
                f"unknown budget key {unknown[0]!r}", f"known keys: {', '.join(sorted(known))}"
            )
        values = dict(data)
        if values.get("max_iters_per_round", 0) is None:
            del values["max_iters_per_round"]
        return cls(**values)


@dataclass
class BudgetState:
    """What a round has spent so far against its budget.

    Mutable on purpose: it is a running tally, created from a budget (and from
    the counters a persisted round carries) for the length of one check.
    """

    budget: TokenBudget
    input_tokens: int = 0
    output_tokens: int = 0
    unsplit_tokens: int = 0  # reported only as a total: no direction to charge them to

    def add(self, input_tokens: int, output_tokens: int, unsplit_tokens: int = 0) -> None:
        self.input_tokens += max(0, int(input_tokens))
        self.output_tokens += max(0, int(output_tokens))
        self.unsplit_tokens += max(0, int(unsplit_tokens))

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.unsplit_tokens

    def max_iters(self) -> int:
        return self.budget.max_iters_per_round

    def exceeded(self) -> BudgetLimit | None:
        """The first token ceiling crossed, in the order input, output, total.

        Strictly greater: spending exactly the ceiling is within budget.
        """
        b = self.budget
        if b.max_input_tokens is not None and self.input_tokens > b.max_input_tokens:
            return BudgetLimit.INPUT
        if b.max_output_tokens is not None and self.output_tokens > b.max_output_tokens:
            return BudgetLimit.OUTPUT
        if b.max_total_tokens is not None and self.total_tokens > b.max_total_tokens:
            return BudgetLimit.TOTAL
        return None

    def wall_exceeded(self, elapsed_s: float) -> bool:
        return self.budget.max_wall_s is not None and elapsed_s > self.budget.max_wall_s

    def describe(self, limit: BudgetLimit, elapsed_s: float | None = None) -> str:
        """`total-tokens: 412000 spent, limit 400000`: what render() and memory show."""
        b = self.budget
        spent, cap = {
            BudgetLimit.INPUT: (self.input_tokens, b.max_input_tokens),
            BudgetLimit.OUTPUT: (self.output_tokens, b.max_output_tokens),
            BudgetLimit.TOTAL: (self.total_tokens, b.max_total_tokens),
            BudgetLimit.WALL: (None if elapsed_s is None else round(elapsed_s), b.max_wall_s),
        }[limit]
        unit = " s" if limit is BudgetLimit.WALL else ""
        cap_text = f"{cap:g}" if isinstance(cap, float) else str(cap)
        if spent is None:
            return f"{limit.label}: limit {cap_text}{unit}"
        return f"{limit.label}: {spent}{unit} spent, limit {cap_text}{unit}"
