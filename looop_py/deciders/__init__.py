"""Decider backends, imported only when a beat actually has to decide."""

from __future__ import annotations

import importlib

from looop_py.deciders.base import Decider
from looop_py.errors import ConfigError
from looop_py.workdir.config import Config

# backend name → "module:Class", imported lazily so a beat pays only for the one it uses.
REGISTRY = {
    "rules": "looop_py.deciders.rules:RulesDecider",
    "command": "looop_py.deciders.command:CommandDecider",
    "openai": "looop_py.deciders.openai:OpenAIDecider",
    "anthropic": "looop_py.deciders.anthropic:AnthropicDecider",
    "script": "looop_py.deciders.script:ScriptDecider",
    "noop": "looop_py.deciders.noop:NoopDecider",
}
BACKENDS = tuple(REGISTRY)


def load(config: Config) -> Decider:
    """Build the backend `[decider] backend` names; its constructor checks its own keys."""
    backend = config.decider.backend
    target = REGISTRY.get(backend)
    if target is None:
        raise ConfigError(
            f"unknown decider backend {backend!r} in [decider]",
            f"choose one of: {', '.join(BACKENDS)}",
        )
    module_name, cls_name = target.split(":")
    module = importlib.import_module(module_name)
    cls = getattr(module, cls_name)
    import inspect  # slow to import; needed only to report a broken backend

    # A backend that takes arguments gets the [decider] table; one that needs none, none.
    if inspect.signature(cls).parameters:
        return cls(config.decider)  # type: ignore[no-any-return]
    return cls()  # type: ignore[no-any-return]
