"""Turn reported tokens into dollars when the backend reported no cost itself."""

from __future__ import annotations

from dataclasses import replace

from looop_py.deciders.base import Usage
from looop_py.spend import prices
from looop_py.workdir.config import DeciderConfig


def priced(usage: Usage | None, cfg: DeciderConfig) -> Usage | None:
    """Fill in cost_usd from the decider's price (spend/prices.py: the `usd_per_mtok_*`
    prices when set, else the built-in one of the CLI a command runs); a reported cost
    always wins. Unmetered stays unmetered (None), and so does a price nobody knows:
    inventing a zero would hide spend from budgets."""
    if usage is None or usage.cost_usd is not None:
        return usage
    price = prices.for_decider(cfg)
    if price is None:
        return usage
    return replace(usage, cost_usd=cost(usage, price))


def cost(usage: Usage, price: prices.Price) -> float:
    """What `usage` costs at `price`."""
    return price.cost(
        usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens
    )
