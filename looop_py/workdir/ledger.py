"""One daily ledger for all judgment: decides, loop rounds' workers, other workers.

    state/spend.json  {"v": 2, "day", "tokens", "usd", "unmetered", "input_tokens",
                       "cache_read_tokens", "cache_write_tokens",
                       "by_source": {source: {"tokens", "usd", "cache_read_tokens",
                                              "input_tokens", "charges"}},
                       "charged": {key: day}}

A source is `decider`, `loop:NAME` (a round's maker and checker) or `workers`
(workers a decide or a human started). Every charge carries an idempotency
key (`decide:<run>`, `worker:<session>`): a key already in `charged` changes
nothing, so a pulse killed between charging and recording that it charged, or
two readers of one ended worker (the pulse's housekeeping and `looop run`),
charge once. Writes hold state/spend.lock (flock), so concurrent chargers
never lose each other's spend. Pure parts take `now`.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import time

from looop_py import jsonio
from looop_py.errors import CorruptFile
from looop_py.record import field, record, replace

# typing is not imported at run time: the ledger is read on beats that decide or start rounds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

    from looop_py.workdir.config import LimitsConfig
    from looop_py.workdir.paths import Paths

DECIDER = "decider"
WORKERS = "workers"  # workers not part of a loop round
KEEP_KEYS_DAYS = 2  # charged keys are remembered for today and yesterday


def loop_source(loop: str) -> str:
    return f"loop:{loop}"


@record(frozen=True)
class Charge:
    """One usage report: what a decide or a worker spent."""

    key: str  # idempotency key: the same key is charged once
    source: str
    tokens: int = 0
    usd: float | None = None  # None: no cost reported or priced
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@record(frozen=True)
class Spend:
    day: str = ""
    tokens: int = 0
    usd: float = 0.0
    unmetered: int = 0  # metered-less decides in a row
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    by_source: dict[str, dict[str, Any]] = field(default_factory=dict)
    charged: dict[str, str] = field(default_factory=dict)  # key → the day it was charged

    def cache_hit_ratio(self) -> float | None:
        """Of today's prompt tokens that reported a cache split, the share read from a cache."""
        if self.input_tokens <= 0:
            return None
        return round(self.cache_read_tokens / self.input_tokens, 4)

    def to_json(self) -> dict[str, Any]:
        return {
            "v": 2,
            "day": self.day,
            "tokens": self.tokens,
            "usd": self.usd,
            "unmetered": self.unmetered,
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "by_source": self.by_source,
            "charged": self.charged,
        }


def local_day(now: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(now))


def today(spend: Spend, now: float) -> Spend:
    """Today's spend: a new day starts at zero and keeps only the recent charged keys."""
    day = local_day(now)
    if spend.day == day:
        return spend
    recent = {local_day(now - 86400 * i) for i in range(KEEP_KEYS_DAYS)}
    return Spend(day=day, charged={k: d for k, d in spend.charged.items() if d in recent})


def charge(spend: Spend, now: float, c: Charge, *, budgeted_usd: bool = False) -> Spend:
    """Add one charge to today's spend; a key already charged changes nothing. Pure.

    A decide that reports no usage (or no cost while a USD budget is set) counts as
    unmetered; the decider's streak of those is what fails a budget closed.
    """
    spend = today(spend, now)
    if c.key in spend.charged:
        return spend
    row = dict(spend.by_source.get(c.source) or {})
    tokens, usd = max(0, c.tokens), max(0.0, c.usd or 0.0)
    row["tokens"] = int(row.get("tokens", 0)) + tokens
    row["usd"] = round(float(row.get("usd", 0.0)) + usd, 6)
    row["input_tokens"] = int(row.get("input_tokens", 0)) + max(0, c.input_tokens)
    row["cache_read_tokens"] = int(row.get("cache_read_tokens", 0)) + max(0, c.cache_read_tokens)
    row["charges"] = int(row.get("charges", 0)) + 1
    unmetered = spend.unmetered
    if c.source == DECIDER:
        metered = c.tokens > 0 and not (budgeted_usd and c.usd is None)
        unmetered = 0 if metered else unmetered + 1
    return replace(
        spend,
        tokens=spend.tokens + tokens,
        usd=round(spend.usd + usd, 6),
        unmetered=unmetered,
        input_tokens=spend.input_tokens + max(0, c.input_tokens),
        cache_read_tokens=spend.cache_read_tokens + max(0, c.cache_read_tokens),
        cache_write_tokens=spend.cache_write_tokens + max(0, c.cache_write_tokens),
        by_source={**spend.by_source, c.source: row},
        charged={**spend.charged, c.key: spend.day},
    )


def spent(spend: Spend, now: float, limits: LimitsConfig) -> str | None:
    """Why today's budget allows no more judgment, or None. Pure."""
    s = today(spend, now)
    if limits.daily_tokens > 0 and s.tokens >= limits.daily_tokens:
        return f"daily token budget spent: {s.tokens} of {limits.daily_tokens}"
    if limits.daily_usd > 0 and s.usd >= limits.daily_usd:
        return f"daily USD budget spent: ${s.usd:.4f} of ${limits.daily_usd:.2f}"
    return None


def held(paths: Paths, limits: LimitsConfig, now: float) -> str | None:
    """Why no more judgment may start today (the budget is spent), or None; no budget, no read."""
    if limits.daily_tokens <= 0 and limits.daily_usd <= 0:
        return None
    return spent(load(paths), now, limits)


def from_usage(key: str, source: str, usage: Mapping[str, Any] | None) -> Charge | None:
    """A charge from a worker's usage record (status.json or result.json), or None."""
    if not isinstance(usage, dict):
        return None
    tokens = _int(usage.get("total_tokens")) or (
        _int(usage.get("input_tokens")) + _int(usage.get("output_tokens"))
    )
    cost: Any = usage.get("cost_usd")
    usd = float(cost) if _finite(cost) and cost >= 0 else None
    if not tokens and usd is None:
        return None
    return Charge(
        key,
        source,
        tokens,
        usd,
        _int(usage.get("input_tokens")),
        _int(usage.get("cache_read_tokens")),
        _int(usage.get("cache_write_tokens")),
    )


# -- on disk --------------------------------------------------------------------------------


def load(paths: Paths) -> Spend:
    """The ledger; a damaged field reads as its zero (a day's spend is rebuilt, not a blocker)."""
    try:
        s = jsonio.read_json(paths.state / "spend.json", {})
    except CorruptFile:
        s = {}
    if not isinstance(s, dict):
        s = {}
    by_source = s.get("by_source")
    charged = s.get("charged")
    return Spend(
        day=str(s.get("day", "")),
        tokens=_int(s.get("tokens")),
        usd=float(s["usd"]) if _finite(s.get("usd")) and s["usd"] >= 0 else 0.0,
        unmetered=_int(s.get("unmetered")),
        input_tokens=_int(s.get("input_tokens")),
        cache_read_tokens=_int(s.get("cache_read_tokens")),
        cache_write_tokens=_int(s.get("cache_write_tokens")),
        by_source={str(k): dict(v) for k, v in (by_source or {}).items() if isinstance(v, dict)}
        if isinstance(by_source, dict)
        else {},
        charged={str(k): str(v) for k, v in charged.items()} if isinstance(charged, dict) else {},
    )


def save(paths: Paths, spend: Spend) -> None:
    jsonio.write_json(paths.state / "spend.json", spend.to_json())


@contextlib.contextmanager
def locked(paths: Paths) -> Iterator[None]:
    """Hold state/spend.lock: one read-modify-write of the ledger at a time."""
    paths.state.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.state / "spend.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the flock


def record_charge(
    paths: Paths, now: float, c: Charge | None, *, budgeted_usd: bool = False
) -> Spend:
    """Charge `c` to the ledger on disk, once per key; returns today's spend."""
    with locked(paths):
        before = load(paths)
        if c is None:
            return today(before, now)
        after = charge(before, now, c, budgeted_usd=budgeted_usd)
        if after != before:
            save(paths, after)
        return after


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0
    return max(0, int(value))


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
