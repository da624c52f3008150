"""One daily ledger for all judgment: decides, loop rounds' workers, other workers.

    state/spend.json  {"v": 2, "day", "tokens", "usd", "unmetered", "input_tokens",
                       "cache_read_tokens", "cache_write_tokens",
                       "by_source": {source: {"tokens", "usd", "cache_read_tokens",
                                              "input_tokens", "charges"}},
                       "by_runtime": {runtime: {"tokens", "usd", "charges"}},
                       "unpriced": {runtime: tokens},
                       "charged": {key: day},
                       "past": {day: {"tokens", "usd", "by_source": {source: {"tokens", "usd"}}}}}

It is the shelf's `state/spend` record (workdir/shelf.py): that file on one
machine; on etcd one record every host charges, so the daily budget holds for
all of them together (a host's charge keys are qualified with its name there).

A source is `decider`, `loop:NAME` (a round's maker and checker) or `workers`
(workers a decide or a human started); a runtime is the CLI or backend that made
the call (claude, codex, llm, anthropic …). A charge with tokens but no dollars
has no known price (spend/prices.py): `[limits] unpriced_usd_per_mtok` prices it
at that worst case, else its tokens are kept under `unpriced`, and while any are,
a daily USD budget allows nothing more (it cannot be kept) and says what has no
price. Every charge carries an idempotency
key (`decide:<run>`, `worker:<session>`): a key already in `charged` changes
nothing, so a pulse killed between charging and recording that it charged, or
two readers of one ended worker (the pulse's housekeeping and `looop run`),
charge once. A charge is a compare-and-swap of the whole record (retried when
another charger got there first), so concurrent chargers never lose each
other's spend. The last HISTORY_DAYS days' totals stay in `past` for the page.
Pure parts take `now`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.errors import Busy, CorruptFile
from looop_py.records import record
from looop_py.workdir import shelf as shelf_mod

if TYPE_CHECKING:
    from looop_py.spend.prices import Price
    from looop_py.workdir.config import LimitsConfig
    from looop_py.workdir.context import WorkDir
    from looop_py.workdir.shelf import Shelf

DECIDER = "decider"
WORKERS = "workers"  # workers not part of a loop round
KEEP_KEYS_DAYS = 2  # charged keys are remembered for today and yesterday
HISTORY_DAYS = 31  # days of totals kept in `past` (the page charts up to a week)
RECORD = "spend"  # the shelf's `state/spend` record: state/spend.json on files
MAX_TRIES = 100  # charges lost to a concurrent charger this often in a row: Busy


def loop_source(loop: str) -> str:
    return f"loop:{loop}"


# @record: nothing compares these (identity) or assigns to them (mypy); each generated
# method is a full beat's fixed cost at import (records.py).
@record(slots=True)
class Charge:
    """One usage report: what a decide or a worker spent."""

    key: str  # idempotency key: the same key is charged once
    source: str
    tokens: int = 0
    usd: float | None = None  # None: no cost reported or priced
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    runtime: str = ""  # the CLI or backend that made the call ("": not known)
    worst_case: bool = False  # usd is [limits] unpriced_usd_per_mtok's, not a known price


@record(slots=True)
class Spend:
    """One local day's spend (state/spend.json), with the past days' totals."""

    day: str = ""
    tokens: int = 0
    usd: float = 0.0
    unmetered: int = 0  # metered-less decides in a row
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    by_source: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_runtime: dict[str, dict[str, Any]] = field(default_factory=dict)
    unpriced: dict[str, int] = field(default_factory=dict)  # runtime → tokens with no price
    charged: dict[str, str] = field(default_factory=dict)  # key → the day it was charged
    past: dict[str, dict[str, Any]] = field(default_factory=dict)  # day → its totals

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
            "by_runtime": self.by_runtime,
            "unpriced": self.unpriced,
            "charged": self.charged,
            "past": self.past,
        }

    def totals(self) -> dict[str, Any]:
        """This day's totals as `past` keeps them."""
        return {
            "tokens": self.tokens,
            "usd": self.usd,
            "by_source": {
                src: {"tokens": _int(row.get("tokens")), "usd": _usd(row.get("usd"))}
                for src, row in sorted(self.by_source.items())
            },
        }


def local_day(now: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(now))


def today(spend: Spend, now: float) -> Spend:
    """Today's spend: a new day starts at zero, keeps only the recent charged keys, and
    files the day before's totals under `past`."""
    day = local_day(now)
    if spend.day == day:
        return spend
    recent = {local_day(now - 86400 * i) for i in range(KEEP_KEYS_DAYS)}
    past = dict(spend.past)
    if spend.day and (spend.tokens or spend.usd or spend.by_source):
        past[spend.day] = spend.totals()
    kept = {local_day(now - 86400 * i) for i in range(1, HISTORY_DAYS + 1)}
    return Spend(
        day=day,
        charged={k: d for k, d in spend.charged.items() if d in recent},
        past={d: v for d, v in sorted(past.items()) if d in kept},
    )


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
    by_runtime = spend.by_runtime
    if c.runtime:
        rt = dict(by_runtime.get(c.runtime) or {})
        rt["tokens"] = int(rt.get("tokens", 0)) + tokens
        rt["usd"] = round(float(rt.get("usd", 0.0)) + usd, 6)
        rt["charges"] = int(rt.get("charges", 0)) + 1
        if c.worst_case:
            rt["worst_case"] = True
        by_runtime = {**by_runtime, c.runtime: rt}
    unpriced = spend.unpriced
    if c.usd is None and tokens > 0:
        what = c.runtime or c.source
        unpriced = {**unpriced, what: unpriced.get(what, 0) + tokens}
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
        by_runtime=by_runtime,
        unpriced=unpriced,
        charged={**spend.charged, c.key: spend.day},
    )


def spent(spend: Spend, now: float, limits: LimitsConfig) -> str | None:
    """Why today's budget allows no more judgment, or None. Pure."""
    s = today(spend, now)
    if limits.daily_tokens > 0 and s.tokens >= limits.daily_tokens:
        return f"daily token budget spent: {s.tokens} of {limits.daily_tokens}"
    if limits.daily_usd > 0 and s.usd >= limits.daily_usd:
        return f"daily USD budget spent: ${s.usd:.4f} of ${limits.daily_usd:.2f}"
    if limits.daily_usd > 0 and s.unpriced:
        return unpriced_hold(s.unpriced)
    return None


def unpriced_hold(unpriced: Mapping[str, int]) -> str:
    """Why a daily USD budget holds while calls of unknown price were made today."""
    named = ", ".join(f"{what} ({n} tokens)" for what, n in sorted(unpriced.items()))
    first = sorted(unpriced)[0]
    return (
        f"daily USD budget cannot be kept: no price for {named}; set"
        f" [runtimes.{first}] (or [decider]) usd_per_mtok_in and usd_per_mtok_out,"
        " or [limits] unpriced_usd_per_mtok, in looop.toml"
    )


def settle(c: Charge, limits: LimitsConfig) -> Charge:
    """A charge of unknown price at `[limits] unpriced_usd_per_mtok`'s worst case, when set."""
    worst = limits.unpriced_usd_per_mtok
    if c.usd is not None or c.tokens <= 0 or worst <= 0:
        return c
    return replace(c, usd=round(c.tokens * worst / 1_000_000, 8), worst_case=True)


def held(wd: WorkDir, now: float) -> str | None:
    """Why no more judgment may start today (the budget is spent), or None; no budget, no read."""
    limits = wd.config.limits
    if limits.daily_tokens <= 0 and limits.daily_usd <= 0:
        return None
    return spent(load(wd), now, limits)


def from_usage(
    key: str,
    source: str,
    usage: Mapping[str, Any] | None,
    *,
    runtime: str = "",
    price: Price | None = None,
) -> Charge | None:
    """A charge from a worker's usage record (status.json or result.json), or None; a
    usage that reports tokens but no cost is priced at `price` (the runtime's)."""
    if not isinstance(usage, dict):
        return None
    tokens_in, tokens_out = _int(usage.get("input_tokens")), _int(usage.get("output_tokens"))
    tokens = _int(usage.get("total_tokens")) or (tokens_in + tokens_out)
    read, written = _int(usage.get("cache_read_tokens")), _int(usage.get("cache_write_tokens"))
    usd = jsonio.number(usage.get("cost_usd"))
    usd = usd if usd is not None and usd >= 0 else None
    if not tokens and usd is None:
        return None
    if usd is None and price is not None and tokens_in + tokens_out > 0:
        usd = price.cost(tokens_in, tokens_out, read, written)
    return Charge(key, source, tokens, usd, tokens_in, read, written, runtime)


# -- on the shelf ---------------------------------------------------------------------------


def load(wd: WorkDir) -> Spend:
    """The ledger; a damaged field reads as its zero (a day's spend is rebuilt, not a blocker)."""
    box = wd.shelf
    return parse(box, box.get("state", RECORD))


def parse(box: Shelf, data: bytes | None) -> Spend:
    try:
        s = {} if data is None else shelf_mod.parse(box, "state", RECORD, data)
    except CorruptFile:
        s = {}
    if not isinstance(s, dict):
        s = {}
    by_source = s.get("by_source")
    by_runtime = s.get("by_runtime")
    unpriced = s.get("unpriced")
    charged = s.get("charged")
    past = s.get("past")
    return Spend(
        day=str(s.get("day", "")),
        tokens=_int(s.get("tokens")),
        usd=_usd(s.get("usd")),
        unmetered=_int(s.get("unmetered")),
        input_tokens=_int(s.get("input_tokens")),
        cache_read_tokens=_int(s.get("cache_read_tokens")),
        cache_write_tokens=_int(s.get("cache_write_tokens")),
        by_source={str(k): dict(v) for k, v in (by_source or {}).items() if isinstance(v, dict)}
        if isinstance(by_source, dict)
        else {},
        by_runtime={str(k): dict(v) for k, v in by_runtime.items() if isinstance(v, dict)}
        if isinstance(by_runtime, dict)
        else {},
        unpriced={str(k): _int(v) for k, v in unpriced.items() if _int(v) > 0}
        if isinstance(unpriced, dict)
        else {},
        charged={str(k): str(v) for k, v in charged.items()} if isinstance(charged, dict) else {},
        past={str(k): dict(v) for k, v in past.items() if isinstance(v, dict)}
        if isinstance(past, dict)
        else {},
    )


def record_charge(
    wd: WorkDir, now: float, c: Charge | None, *, budgeted_usd: bool = False
) -> Spend:
    """Charge `c` to the ledger, once per key; returns today's spend."""
    box = wd.shelf
    if c is not None:
        c = settle(c, wd.config.limits)
    if c is not None and box.shared:
        c = replace(c, key=f"{c.key}@{box.host}")  # run and session ids are only unique per host
    for _ in range(MAX_TRIES):
        data = box.get("state", RECORD)
        before = parse(box, data)
        if c is None:
            return today(before, now)
        after = charge(before, now, c, budgeted_usd=budgeted_usd)
        if after == before or box.swap("state", RECORD, data, shelf_mod.dumps(after.to_json())):
            return after
    raise Busy(f"the spend ledger changed under this charge {MAX_TRIES} times in a row")


def _int(value: Any) -> int:
    return max(0, int(value)) if jsonio.number(value) is not None else 0


def _usd(value: Any) -> float:
    return max(0.0, jsonio.number(value) or 0.0)
