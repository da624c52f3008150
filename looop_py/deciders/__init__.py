"""Decider backends, imported only when a beat actually has to decide."""

from __future__ import annotations

from looop_py.config import Config
from looop_py.deciders.base import Decider
from looop_py.errors import ConfigError

BACKENDS = ("rules", "noop")


def load(config: Config) -> Decider:
    backend = config.decider.backend
    if backend == "rules":
        from looop_py.deciders.rules import RulesDecider

        return RulesDecider()
    if backend == "noop":
        from looop_py.deciders.noop import NoopDecider

        return NoopDecider()
    raise ConfigError(
        f"unknown decider backend {backend!r} in [decider]",
        f"choose one of: {', '.join(BACKENDS)}",
    )
