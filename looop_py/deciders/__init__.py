"""Decider backends, imported only when a beat actually has to decide."""

from __future__ import annotations

from collections.abc import Callable

from looop_py.deciders.base import Decider
from looop_py.errors import ConfigError
from looop_py.workdir.config import Config, DeciderConfig

# Each factory builds its backend from the [decider] table (its constructor checks the keys
# it needs) and imports it only then, so a beat pays only for the one it uses.
Factory = Callable[[DeciderConfig], Decider]


def _rules(cfg: DeciderConfig) -> Decider:
    from looop_py.deciders.rules import RulesDecider  # only when this backend is chosen

    return RulesDecider()


def _command(cfg: DeciderConfig) -> Decider:
    from looop_py.deciders.command import CommandDecider  # only when this backend is chosen

    return CommandDecider(cfg)


def _openai(cfg: DeciderConfig) -> Decider:
    from looop_py.deciders.openai import OpenAIDecider  # only when this backend is chosen

    return OpenAIDecider(cfg)


def _anthropic(cfg: DeciderConfig) -> Decider:
    from looop_py.deciders.anthropic import AnthropicDecider  # only when this backend is chosen

    return AnthropicDecider(cfg)


def _script(cfg: DeciderConfig) -> Decider:
    from looop_py.deciders.script import ScriptDecider  # only when this backend is chosen

    return ScriptDecider(cfg)


def _noop(cfg: DeciderConfig) -> Decider:
    from looop_py.deciders.noop import NoopDecider  # only when this backend is chosen

    return NoopDecider()


# backend name → factory; `[decider] backend` names one.
FACTORIES: dict[str, Factory] = {
    "rules": _rules,
    "command": _command,
    "openai": _openai,
    "anthropic": _anthropic,
    "script": _script,
    "noop": _noop,
}
BACKENDS = tuple(FACTORIES)


def load(config: Config) -> Decider:
    """Build the backend `[decider] backend` names."""
    backend = config.decider.backend
    factory = FACTORIES.get(backend)
    if factory is None:
        raise ConfigError(
            f"unknown decider backend {backend!r} in [decider]",
            f"choose one of: {', '.join(BACKENDS)}",
        )
    return factory(config.decider)
