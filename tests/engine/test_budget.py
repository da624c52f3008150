from __future__ import annotations

import pytest

from looop_py.spend.ledger import Charge, charge
from looop_py.spend.limits import (
    Backoff,
    Ledgers,
    Spend,
    backoff_delay,
    decide_block,
    flap_update,
    flapping,
    local_day,
)
from looop_py.workdir.config import LimitsConfig

NOW = 1_800_000_000.0


def block(led: Ledgers, now: float = NOW, policy: str = "p", **limits: object) -> str | None:
    return decide_block(led, now=now, policy=policy, limits=LimitsConfig(**limits))  # type: ignore[arg-type]


@pytest.mark.parametrize("n,delay", [(0, 0), (1, 60), (2, 120), (3, 240), (4, 300), (9, 300)])
def test_backoff_doubles_and_caps(n: int, delay: float) -> None:
    assert backoff_delay(n, 60, 300) == delay


def test_backoff_holds_until_it_expires_or_policy_changes() -> None:
    led = Ledgers(backoff=Backoff(fails=2, at=NOW - 100, policy="p", reason="x"))
    assert "backoff" in (block(led) or "")
    assert block(led, now=NOW + 21) is None  # 120 s after the failure
    assert block(led, policy="edited") is None  # a human edit retries at once


def test_decides_per_hour_is_a_rolling_window() -> None:
    led = Ledgers(decides=tuple(NOW - 10 * i for i in range(120)))
    assert "decide cap" in (block(led) or "")
    assert block(led, now=NOW + 3600) is None


def test_daily_budgets_and_day_rollover() -> None:
    day = local_day(NOW)
    spent = Ledgers(spend=Spend(day=day, tokens=1000, usd=2.5))
    assert "token budget" in (block(spent, daily_tokens=1000) or "")
    assert block(spent, daily_tokens=1001) is None
    assert "USD budget" in (block(spent, daily_usd=2.0) or "")
    assert block(spent, daily_tokens=1000, now=NOW + 86400) is None  # a new day


def test_unmetered_runs_fail_closed_only_with_a_budget() -> None:
    s = Spend()
    for i in range(3):
        s = charge(s, NOW, Charge(f"decide:{i}", "decider"))
    led = Ledgers(spend=s)
    assert "fails closed" in (block(led, daily_tokens=10_000) or "")
    assert block(led) is None
    metered = charge(s, NOW, Charge("decide:3", "decider", tokens=5))
    assert metered.unmetered == 0 and metered.tokens == 5
    # A worker reporting nothing says nothing about the decider's metering.
    assert charge(s, NOW, Charge("worker:w", "workers")).unmetered == 3


def test_flapping_needs_a_streak() -> None:
    state: dict[str, object] = {}
    for i in range(5):
        state, _ = flap_update(state, {"snap:a": str(i), "snap:b": "same", "goal:x": str(i)})
    assert flapping(state, 5) == []  # the first beat only sets the baseline
    state, _ = flap_update(state, {"snap:a": "5", "snap:b": "same"})
    assert flapping(state, 5) == ["snap:a"]
    state, _ = flap_update(state, {"snap:a": "5", "snap:b": "same"})
    assert flapping(state, 5) == []
