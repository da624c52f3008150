"""Prices: a call that reports tokens but no dollars is priced by its runtime or decider
(looop.toml, else the pinned CLI's default model), or charged as unpriced, which then
holds a daily USD budget, or counts at a configured worst case."""

from __future__ import annotations

import pytest

from looop_py.spend import ledger, prices
from looop_py.workdir.config import DeciderConfig, LimitsConfig, RuntimeConfig
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd

NOW = 1_800_000_000.0
# codex's turn.completed as the worker stream reader keeps it: tokens, no cost.
CODEX_USAGE = {
    "input_tokens": 10_000,
    "output_tokens": 500,
    "cache_read_tokens": 8_000,
    "total_tokens": 10_500,
    "cost_usd": None,
}


def test_an_unknown_price_holds_a_usd_budget_and_names_what_has_none(wd: Paths) -> None:
    """Before: a runtime reporting no cost was $0 forever, and the USD budget never held."""
    wd.config.write_text("[limits]\ndaily_usd = 5.0\n")
    c = ledger.from_usage("worker:w1", "loop:tidy", CODEX_USAGE, runtime="mycli")
    assert c is not None and c.usd is None and c.tokens == 10_500
    spend = ledger.record_charge(open_wd(wd), NOW, c)
    assert spend.tokens == 10_500 and spend.unpriced == {"mycli": 10_500}
    why = ledger.spent(spend, NOW, open_wd(wd).config.limits)
    assert why is not None and "no price for mycli (10500 tokens)" in why
    assert "[runtimes.mycli]" in why and "unpriced_usd_per_mtok" in why
    # without a USD budget, tokens of unknown price hold nothing
    assert ledger.spent(spend, NOW, LimitsConfig(daily_tokens=10**6)) is None


def test_a_worst_case_price_counts_an_unknown_one_against_daily_usd(wd: Paths) -> None:
    wd.config.write_text("[limits]\ndaily_usd = 5.0\nunpriced_usd_per_mtok = 100.0\n")
    c = ledger.from_usage("worker:w1", "loop:tidy", CODEX_USAGE, runtime="mycli")
    spend = ledger.record_charge(open_wd(wd), NOW, c)
    assert spend.unpriced == {} and spend.usd == pytest.approx(1.05)
    assert spend.by_runtime["mycli"] == {
        "tokens": 10_500,
        "usd": pytest.approx(1.05),
        "charges": 1,
        "worst_case": True,
    }


def test_codex_is_priced_at_its_default_model_unless_looop_toml_says_otherwise(
    wd: Paths,
) -> None:
    price = prices.for_runtime(open_wd(wd).config, "codex", "codex")
    assert price is not None and price.model == "gpt-6.1-sol"
    c = ledger.from_usage("worker:w1", "workers", CODEX_USAGE, runtime="codex", price=price)
    # 2000 fresh prompt tokens at $2, 8000 cached at $0.10, 500 out at $10, per million
    assert c is not None and c.usd == pytest.approx((2000 * 2 + 8000 * 0.1 + 500 * 10) / 1e6)
    wd.config.write_text("[runtimes.codex]\nusd_per_mtok_in = 1.0\nusd_per_mtok_out = 4.0\n")
    own = prices.for_runtime(open_wd(wd).config, "codex", "codex")
    assert own == prices.Price(1.0, 4.0)
    c = ledger.from_usage("worker:w1", "workers", CODEX_USAGE, runtime="codex", price=own)
    assert c is not None and c.usd == pytest.approx((10_000 * 1 + 500 * 4) / 1e6)


@pytest.mark.parametrize("cli", sorted(prices.BUILTIN))
def test_every_pinned_cli_has_a_built_in_price(cli: str) -> None:
    price = prices.BUILTIN[cli]
    assert price.model and price.usd_per_mtok_in > 0 and price.usd_per_mtok_out > 0
    assert price.cost(1_000_000, 0) == pytest.approx(price.usd_per_mtok_in)


def test_a_command_decider_is_priced_by_the_cli_it_runs() -> None:
    llm = DeciderConfig(backend="command", command="LLM_X=1 /opt/bin/llm -u -m x")
    assert prices.command_cli(llm.command) == "llm"
    assert prices.for_decider(llm) == prices.BUILTIN["llm"]
    assert prices.for_decider(DeciderConfig(backend="command", command="ollama run x")) is None
    assert prices.for_decider(DeciderConfig(backend="openai", model="x")) is None
    own = DeciderConfig(backend="command", command="llm", usd_per_mtok_in=1.0)
    assert prices.for_decider(own) == prices.Price(1.0, 0.0)
    assert prices.decider_runtime(llm) == "llm"
    assert prices.configured(RuntimeConfig()) is None


def test_a_runtime_price_out_of_range_is_refused(wd: Paths) -> None:
    from looop_py.errors import ConfigError

    wd.config.write_text("[runtimes.codex]\nusd_per_mtok_in = -1\n")
    with pytest.raises(ConfigError, match=r"runtimes.codex.usd_per_mtok_in"):
        _ = open_wd(wd).config


def test_status_shows_spend_by_runtime_and_names_the_missing_price(wd: Paths) -> None:
    import time

    from tests.conftest import invoke_looop

    wd.config.write_text('[decider]\nbackend = "noop"\n[limits]\ndaily_usd = 5.0\n')
    now = time.time()
    c = ledger.from_usage("worker:w1", "loop:tidy", CODEX_USAGE, runtime="mycli")
    ledger.record_charge(open_wd(wd), now, c)
    priced = ledger.Charge("worker:w2", "workers", 100, 0.25, runtime="claude")
    ledger.record_charge(open_wd(wd), now, priced)
    out = invoke_looop("-C", str(wd.root), "status").stdout
    assert "by runtime claude 100 tokens $0.2500 · mycli 10500 tokens $0.0000" in out, out
    assert "no price  mycli 10500 tokens" in out
    assert "no price for mycli (10500 tokens)" in out  # why the decider is held
