"""looop-py: a filesystem-native sensor/decider control loop.

Importing the package is cheap: the public API is re-exported lazily so that
`looop pulse` pays only for the modules a quiet beat needs.
"""

from __future__ import annotations

import importlib

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

# name -> module that defines it; resolved on first attribute access.
_EXPORTS: dict[str, str] = {
    "LooopError": "looop_py.errors",
    "Paths": "looop_py.paths",
    "Config": "looop_py.config",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'looop_py' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = ["__version__", *_EXPORTS]  # noqa: PLE0604 - the lazy names are strings  # noqa: PLE0604 - the lazy names are strings
