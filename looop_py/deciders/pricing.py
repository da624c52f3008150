"""Turn reported tokens into dollars when the backend reported no cost itself."""

from __future__ import annotations

from looop_py.deciders.base import Usage
from looop_py.workdir.config import DeciderConfig


def priced(usage: Usage | None, cfg: DeciderConfig) -> Usage | None:
    """Fill in cost_usd from `usd_per_mtok_in/out` when set; a reported cost always wins.

    Unmetered stays unmetered (None): inventing a zero would hide spend from budgets.
    """
    if usage is None or usage.cost_usd is not None:
        return usage
    if cfg.usd_per_mtok_in is None and cfg.usd_per_mtok_out is None:
        return usage
    cost = (
        usage.input_tokens * (cfg.usd_per_mtok_in or 0.0)
        + usage.output_tokens * (cfg.usd_per_mtok_out or 0.0)
    ) / 1_000_000
    return Usage(usage.input_tokens, usage.output_tokens, round(cost, 8))
