"""Spend limits outside the model: pure checks that take `now`, and their ledgers in state/.

  decides per rolling hour   state/decides.json   {"ts": [...]}
  daily tokens and USD       state/spend.json     spend/ledger.py: one ledger, by source
  failure backoff            state/backoff.json   {"fails", "at", "policy", "reason"}
  flapping sensors           state/flap.json      {"values": {item: v}, "streaks": {item: n}}

Each is a `state` record on the work dir's shelf (workdir/shelf.py): these files on one
machine, keys every host shares on etcd, so the caps, the backoff and the streaks hold
for the loop, not for each host. Only a beat writes them (under its pulse token).

Budgets fail closed: with a token or USD budget set, a backend that reports
no usage three times in a row stops deciding until a human looks. The daily
budgets count every source the ledger holds (decides, loop rounds, workers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.records import record
from looop_py.spend import ledger
from looop_py.spend.ledger import Spend, local_day
from looop_py.spend.ledger import today as spend_today
from looop_py.workdir import shelf
from looop_py.workdir.config import LimitsConfig

__all__ = ["Backoff", "Ledgers", "Spend", "decide_block", "local_day", "spend_today"]

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir

HOUR = 3600.0


# @record: nothing compares these (identity) or assigns to them (mypy); each generated
# method is a full beat's fixed cost at import (records.py).
@record
class Backoff:
    """Failed decides in a row (state/backoff.json): how many, when, under which policy."""

    fails: int = 0
    at: float = 0.0
    policy: str | None = None  # the policy hash when it last failed
    reason: str = ""


@record
class Ledgers:
    """The records the decide gate reads: recent decides, the day's spend, the backoff."""

    decides: tuple[float, ...] = ()
    spend: Spend = field(default_factory=Spend)
    backoff: Backoff = field(default_factory=Backoff)


def backoff_delay(fails: int, base_s: float, cap_s: float) -> float:
    """60·2^(n−1) s after n consecutive failures, capped."""
    if fails <= 0:
        return 0.0
    return float(min(cap_s, base_s * 2 ** (fails - 1)))


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
    spent = ledger.spent(spend, now, limits)
    if spent is not None:
        return spent
    budgeted = limits.daily_tokens > 0 or limits.daily_usd > 0
    if budgeted and limits.unmetered_limit > 0 and spend.unmetered >= limits.unmetered_limit:
        return (
            f"budget fails closed: {spend.unmetered} decides in a row reported no usage; "
            "use a backend that reports usage, or unset the daily budgets"
        )
    return None


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


DECIDES, BACKOFF = "decides", "backoff"  # the shelf's `state` records (and shelf.FLAP)
FLAP = shelf.FLAP


def _read(wd: WorkDir, name: str) -> dict[str, Any]:
    return shelf.read_object(wd.shelf, "state", name) or {}  # a ledger is rebuilt


def _num(data: Mapping[str, Any], key: str) -> float:
    """A finite number from a ledger, else 0: a damaged field counts as nothing spent."""
    return jsonio.number(data.get(key)) or 0.0


def load(wd: WorkDir) -> Ledgers:
    """The ledgers; a field of the wrong type reads as its zero, a file that is not an
    object as empty (they are caches of recent history, rebuilt as beats go by)."""
    d = _read(wd, DECIDES)
    b = _read(wd, BACKOFF)
    ts = d.get("ts")
    policy = b.get("policy")
    return Ledgers(
        decides=tuple(
            t for t in map(jsonio.number, ts if isinstance(ts, list) else []) if t is not None
        ),
        spend=ledger.load(wd),
        backoff=Backoff(
            fails=max(0, min(int(_num(b, "fails")), 64)),
            at=_num(b, "at"),
            policy=policy if isinstance(policy, str) else None,
            reason=str(b.get("reason", "")),
        ),
    )


def save_decide(wd: WorkDir, ledgers: Ledgers, now: float) -> None:
    recent = [t for t in ledgers.decides if now - t < HOUR] + [now]
    shelf.write_json(wd.shelf, "state", DECIDES, {"v": 1, "ts": recent})


def save_backoff(wd: WorkDir, backoff: Backoff | None) -> None:
    box = wd.shelf
    if backoff is None:
        box.delete("state", BACKOFF)
        return
    shelf.write_json(box, "state", BACKOFF, {"v": 1, **backoff.__dict__})


def load_flap(wd: WorkDir) -> dict[str, Any]:
    return _read(wd, FLAP)


def save_flap(wd: WorkDir, state: Mapping[str, Any]) -> None:
    shelf.write_json(wd.shelf, "state", FLAP, {"v": 1, **state})
