"""Turn reported tokens into dollars when the backend reported no cost itself."""

from __future__ import annotations

from dataclasses import replace

from looop_py.deciders.base import Usage
from looop_py.workdir.config import DeciderConfig


def priced(usage: Usage | None, cfg: DeciderConfig) -> Usage | None:
    """Fill in cost_usd from the `usd_per_mtok_*` prices when set; a reported cost always wins.

    Prompt tokens read from the provider's cache cost `usd_per_mtok_cached_in`,
    those written to it `usd_per_mtok_cache_write`; either unset costs as
    `usd_per_mtok_in`. Unmetered stays unmetered (None): inventing a zero would
    hide spend from budgets.
    """
    if usage is None or usage.cost_usd is not None:
        return usage
    if cfg.usd_per_mtok_in is None and cfg.usd_per_mtok_out is None:
        return usage
    return replace(usage, cost_usd=cost(usage, cfg))


def cost(usage: Usage, cfg: DeciderConfig) -> float:
    """What `usage` costs at the configured prices (unset prices count as 0, cache prices
    as the input price)."""
    price_in = cfg.usd_per_mtok_in or 0.0
    read = min(usage.cache_read_tokens, usage.input_tokens)
    written = min(usage.cache_write_tokens, usage.input_tokens - read)
    plain = usage.input_tokens - read - written
    price_read = price_in if cfg.usd_per_mtok_cached_in is None else cfg.usd_per_mtok_cached_in
    price_write = price_in if cfg.usd_per_mtok_cache_write is None else cfg.usd_per_mtok_cache_write
    total = (
        plain * price_in
        + read * price_read
        + written * price_write
        + usage.output_tokens * (cfg.usd_per_mtok_out or 0.0)
    )
    return round(total / 1_000_000, 8)
