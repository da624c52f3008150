"""Spend limits outside the model: pure checks that take `now`, and their ledgers in state/.

  decides per rolling hour   state/decides.json   {"ts": [...]}
  daily tokens and USD       state/spend.json     {"day", "tokens", "usd", "unmetered"}
  failure backoff            state/backoff.json   {"fails", "at", "policy", "reason"}
  flapping sensors           state/flap.json      {"values": {item: v}, "streaks": {item: n}}

Budgets fail closed: with a token or USD budget set, a backend that reports
no usage three times in a row stops deciding until a human looks.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import CorruptFile
from looop_py.workdir.config import LimitsConfig
from looop_py.workdir.paths import Paths

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOUR = 3600.0


@dataclass(frozen=True)
class Spend:
    day: str = ""
    tokens: int = 0
    usd: float = 0.0
    unmetered: int = 0  # metered-less decides in a row


@dataclass(frozen=True)
class Backoff:
    fails: int = 0
    at: float = 0.0
    policy: str | None = None  # the policy hash when it last failed
    reason: str = ""


@dataclass(frozen=True)
class Ledgers:
    decides: tuple[float, ...] = ()
    spend: Spend = field(default_factory=Spend)
    backoff: Backoff = field(default_factory=Backoff)


def local_day(now: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(now))


def backoff_delay(fails: int, base_s: float, cap_s: float) -> float:
    """60·2^(n−1) s after n consecutive failures, capped."""
    if fails <= 0:
        return 0.0
    return float(min(cap_s, base_s * 2 ** (fails - 1)))


def spend_today(spend: Spend, now: float) -> Spend:
    return spend if spend.day == local_day(now) else Spend(day=local_day(now))


def decide_block(ledgers: Ledgers, *, now: float, policy: str, limits: LimitsConfig) -> str | None:
    """Why the pulse must not call the decider now, or None. Pure."""
    b = ledgers.backoff
    if limits.backoff_max_s > 0 and b.fails > 0 and b.policy == policy:
        left = b.at + backoff_delay(b.fails, limits.backoff_base_s, limits.backoff_max_s) - now
        if left > 0:
            return (
                f"backoff: {b.fails} failure(s) in a row, next try in {left:.0f}s"
                " (editing PLAYBOOK.md or a goal retries at once)"
            )
    recent = [t for t in ledgers.decides if now - t < HOUR]
    cap = limits.decides_per_hour
    if cap > 0 and len(recent) >= cap:
        return f"decide cap: {len(recent)} decides in the last hour (limit {cap})"
    spend = spend_today(ledgers.spend, now)
    if limits.daily_tokens > 0 and spend.tokens >= limits.daily_tokens:
        return f"daily token budget spent: {spend.tokens} of {limits.daily_tokens}"
    if limits.daily_usd > 0 and spend.usd >= limits.daily_usd:
        return f"daily USD budget spent: ${spend.usd:.4f} of ${limits.daily_usd:.2f}"
    budgeted = limits.daily_tokens > 0 or limits.daily_usd > 0
    if budgeted and limits.unmetered_limit > 0 and spend.unmetered >= limits.unmetered_limit:
        return (
            f"budget fails closed: {spend.unmetered} decides in a row reported no usage; "
            "use a backend that reports usage, or unset the daily budgets"
        )
    return None


def charge(
    spend: Spend, now: float, *, tokens: int | None, usd: float | None, budgeted_usd: bool
) -> Spend:
    """Add one decide's usage to today's spend. None usage counts as unmetered."""
    spend = spend_today(spend, now)
    unmetered = tokens is None or (budgeted_usd and usd is None)
    return Spend(
        day=spend.day,
        tokens=spend.tokens + (tokens or 0),
        usd=round(spend.usd + (usd or 0.0), 6),
        unmetered=spend.unmetered + 1 if unmetered else 0,
    )


def flap_update(
    state: Mapping[str, Any], items: Mapping[str, str]
) -> tuple[dict[str, Any], list[str]]:
    """Advance per-item change streaks by one woken beat; returns (state, streaks by item)."""
    values = _mapping(state.get("values"))
    streaks = _mapping(state.get("streaks"))
    snaps = {k: v for k, v in items.items() if k.startswith("snap:")}
    new_streaks: dict[str, int] = {}
    for item, value in snaps.items():
        changed = item in values and values[item] != value
        n = int(_num(streaks, item)) + 1 if changed else 0
        if n:
            new_streaks[item] = n
    return {"values": snaps, "streaks": new_streaks}, sorted(new_streaks)


def flapping(state: Mapping[str, Any], streak: int) -> list[str]:
    """Items whose signal changed on `streak` woken beats running."""
    if streak <= 0:
        return []
    streaks = _mapping(state.get("streaks"))
    return sorted(k for k in streaks if _num(streaks, k) >= streak)


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


# -- ledgers on disk ----------------------------------------------------------------------


def _read(path: Path) -> dict[str, Any]:
    try:
        data = jsonio.read_json(path, {})
    except CorruptFile:
        return {}  # a ledger is rebuilt rather than blocking the loop forever
    return data if isinstance(data, dict) else {}


def _num(data: Mapping[str, Any], key: str) -> float:
    """A finite number from a ledger, else 0: a damaged field counts as nothing spent."""
    value = data.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    return float(value)


def load(paths: Paths) -> Ledgers:
    """The ledgers; a field of the wrong type reads as its zero, a file that is not an
    object as empty (they are caches of recent history, rebuilt as beats go by)."""
    d = _read(paths.state / "decides.json")
    s = _read(paths.state / "spend.json")
    b = _read(paths.state / "backoff.json")
    ts = d.get("ts")
    policy = b.get("policy")
    return Ledgers(
        decides=tuple(
            float(t)
            for t in (ts if isinstance(ts, list) else [])
            if isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t)
        ),
        spend=Spend(
            day=str(s.get("day", "")),
            tokens=int(_num(s, "tokens")),
            usd=_num(s, "usd"),
            unmetered=int(_num(s, "unmetered")),
        ),
        backoff=Backoff(
            fails=max(0, min(int(_num(b, "fails")), 64)),
            at=_num(b, "at"),
            policy=policy if isinstance(policy, str) else None,
            reason=str(b.get("reason", "")),
        ),
    )


def save_decide(paths: Paths, ledgers: Ledgers, now: float) -> None:
    recent = [t for t in ledgers.decides if now - t < HOUR] + [now]
    jsonio.write_json(paths.state / "decides.json", {"v": 1, "ts": recent})


def save_spend(paths: Paths, spend: Spend) -> None:
    jsonio.write_json(paths.state / "spend.json", {"v": 1, **spend.__dict__})


def save_backoff(paths: Paths, backoff: Backoff | None) -> None:
    path = paths.state / "backoff.json"
    if backoff is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    jsonio.write_json(path, {"v": 1, **backoff.__dict__})


def load_flap(paths: Paths) -> dict[str, Any]:
    return _read(paths.flap)


def save_flap(paths: Paths, state: Mapping[str, Any]) -> None:
    jsonio.write_json(paths.flap, {"v": 1, **state})
