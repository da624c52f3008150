"""What a call costs when its CLI or API reported tokens but no dollars.

A reported cost always wins. Else the price is the one configured for that runtime
(`[runtimes.NAME] usd_per_mtok_*`) or decider (`[decider] usd_per_mtok_*`), else the
built-in price of the default model of the pinned CLI it runs (BUILTIN), else unknown:
the call's tokens are charged all the same, and then `[limits] unpriced_usd_per_mtok`
prices it at that worst case, or (unset) the daily USD budget holds every loop until a
price is configured, the hold naming what has no price (spend/ledger.py).

Prices are USD per million tokens. Cached prompt tokens cost `cached_in`, prompt tokens
written to a cache `cache_write`; either unset costs as `in`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from looop_py.workdir.config import Config, DeciderConfig, RuntimeConfig


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens: in, out, read from and written to a cache."""

    usd_per_mtok_in: float
    usd_per_mtok_out: float
    usd_per_mtok_cached_in: float | None = None
    usd_per_mtok_cache_write: float | None = None
    model: str = ""  # the model it is the price of ("" for a configured price)

    def cost(self, tokens_in: int, tokens_out: int, read: int = 0, written: int = 0) -> float:
        """What these tokens cost; `read` and `written` are parts of `tokens_in`."""
        read = max(0, min(read, tokens_in))
        written = max(0, min(written, tokens_in - read))
        plain = tokens_in - read - written
        p_in = self.usd_per_mtok_in
        p_read = p_in if self.usd_per_mtok_cached_in is None else self.usd_per_mtok_cached_in
        p_write = p_in if self.usd_per_mtok_cache_write is None else self.usd_per_mtok_cache_write
        total = (
            plain * p_in + read * p_read + written * p_write + tokens_out * self.usd_per_mtok_out
        )
        return round(total / 1_000_000, 8)


# The pinned CLIs' default models and their list prices (USD per million tokens), by the
# CLI's name (a runtime's `usage` stream or name, a command decider's first word). Each
# CLI's default when the user names no model: claude 2.1.197 Sonnet 5 (its own price
# table: $3 / $15, cache reads $0.30, writes $3.75); codex 0.169.0 the first model of its
# bundled list, gpt-6.1-sol; pi 0.73.1 with an Anthropic key claude-opus-4-7 (its models
# table); llm 0.36 gpt-5.6-luna (DEFAULT_MODEL); aider 0.86.2 with an OpenAI key gpt-4o
# (with an Anthropic key it picks Sonnet 4.5, at the claude price).
BUILTIN: dict[str, Price] = {
    "claude": Price(3.0, 15.0, 0.30, 3.75, model="claude-sonnet-5"),
    "codex": Price(2.0, 10.0, 0.10, model="gpt-6.1-sol"),
    "pi": Price(5.0, 25.0, 0.50, 6.25, model="claude-opus-4-7"),
    "llm": Price(0.20, 1.20, 0.02, model="gpt-5.6-luna"),
    "aider": Price(2.50, 10.0, 1.25, model="gpt-4o"),
}


def configured(
    cfg: DeciderConfig | RuntimeConfig,
) -> Price | None:
    """The price set in looop.toml for a decider or a runtime, or None (none set)."""
    if cfg.usd_per_mtok_in is None and cfg.usd_per_mtok_out is None:
        return None
    return Price(
        cfg.usd_per_mtok_in or 0.0,
        cfg.usd_per_mtok_out or 0.0,
        cfg.usd_per_mtok_cached_in,
        cfg.usd_per_mtok_cache_write,
    )


def command_cli(command: str) -> str:
    """The CLI a decider command runs: its first word's file name (`claude -p …` → claude)."""
    import shlex  # only for a command decider or worker, not on a rules or noop beat

    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    words = [w for w in words if "=" not in w.split("/")[0]]  # skip VAR=value prefixes
    return PurePath(words[0]).name if words else ""


def for_decider(cfg: DeciderConfig) -> Price | None:
    """The decider's price: configured, else the built-in one of the CLI it runs."""
    price = configured(cfg)
    if price is not None or cfg.backend != "command":
        return price
    return BUILTIN.get(command_cli(cfg.command))


def for_runtime(config: Config, runtime: str, stream: str = "") -> Price | None:
    """A runtime's price: `[runtimes.NAME]`'s, else the built-in one of the CLI whose
    stream it reads (`usage`) or whose name it has."""
    rc = config.runtimes.get(runtime)
    price = configured(rc) if rc is not None else None
    if price is not None:
        return price
    return BUILTIN.get(stream) or BUILTIN.get(runtime)


def decider_runtime(cfg: DeciderConfig) -> str:
    """What spend calls the decider's runtime: the CLI a command runs, else the backend."""
    if cfg.backend == "command":
        return command_cli(cfg.command) or "command"
    return cfg.backend
