"""looop-py: a filesystem-native sensor/decider control loop.

Importing the package is cheap: the public API is re-exported lazily so that
`looop pulse` pays only for the modules a quiet beat needs.
"""

from __future__ import annotations

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

# name -> module that defines it; resolved on first attribute access.
_EXPORTS: dict[str, str] = {
    "LooopError": "looop_py.errors",
    "Paths": "looop_py.workdir.paths",
    "Config": "looop_py.workdir.config",
    # -- the door: a work dir opened once (looop.toml, its shelf), passed to the core --
    "WorkDir": "looop_py.workdir.context",
    "open_workdir": "looop_py.coord.choose",
    # -- the loop engine (looop_py/engine/) --
    "LoopLevel": "looop_py.engine.levels",
    "ProposedAction": "looop_py.engine.levels",
    "GateDecision": "looop_py.engine.levels",
    "AlwaysEscalate": "looop_py.engine.levels",
    "AllowlistGate": "looop_py.engine.levels",
    "CallbackGate": "looop_py.engine.levels",
    "default_gate_for": "looop_py.engine.levels",
    "TokenBudget": "looop_py.engine.budget",
    "BudgetLimit": "looop_py.engine.budget",
    "BudgetState": "looop_py.engine.budget",
    "LoopSpec": "looop_py.engine.spec",
    "Schedule": "looop_py.engine.cadence",
    "ScheduleError": "looop_py.engine.cadence",
    "ActionReceipt": "looop_py.engine.actions",
    "ActionError": "looop_py.engine.actions",
    "ApprovalOnlyExecutor": "looop_py.engine.actions",
    "CallbackActionExecutor": "looop_py.engine.actions",
    "CommandActionExecutor": "looop_py.loops.executor",
    "HumanGate": "looop_py.engine.protocols",
    "ActionExecutor": "looop_py.engine.protocols",
    "LoopSink": "looop_py.engine.protocols",
    "WorkerRunner": "looop_py.engine.protocols",
    "RoundOutcome": "looop_py.engine.report",
    "RoundReport": "looop_py.engine.report",
    "LoopEngine": "looop_py.engine.loop",
    "LoopScheduler": "looop_py.engine.scheduler",
    "StdoutSink": "looop_py.engine.scheduler",
}

# name -> module that *is* the export (a submodule re-exported under a short name).
_MODULES: dict[str, str] = {
    "patterns": "looop_py.engine.patterns",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None and name not in _MODULES:
        # `from looop_py import procs` asks here before it imports the submodule: every
        # quiet-path import would otherwise load importlib (and warnings) first.
        raise AttributeError(f"module 'looop_py' has no attribute {name!r}")
    import importlib  # only when a lazy name is asked for: the quiet beat never does

    if module is None:
        value = importlib.import_module(_MODULES[name])
        globals()[name] = value
        return value
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, *_MODULES])


__all__ = ["__version__", *_EXPORTS, *_MODULES]  # noqa: PLE0604 - the lazy names are strings
