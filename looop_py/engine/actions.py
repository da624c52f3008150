"""Action executors: what happens once a proposal may proceed.

The gate decides whether an action is allowed; an executor performs it (open a
PR, commit, post a comment). The default executor performs nothing and says so
in its receipt, so a loop wired without one can never surprise anybody.
`action_commands` reads the `[actions]` table of looop.toml; the executor that
runs those commands lives with the work dir (looop_py/loops/executor.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from looop_py.engine.levels import ProposedAction
from looop_py.engine.spec import LoopSpec
from looop_py.errors import ConfigError

# typing is not imported at run time: the engine imports as a light library.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_ACTION_TIMEOUT_S = 300.0


class ActionError(Exception):
    """The executor could not carry the action out; the round fails with this message."""


@dataclass(frozen=True)
class ActionReceipt:
    """Evidence that an approved action was handed to its executor, and what came of it.

    `ran` is False when nothing was run (no executor or command for the kind): the
    round still proceeded, but no one may read it as the action having happened."""

    kind: str
    summary: str
    ran: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary, "ran": self.ran}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ActionReceipt:
        return cls(str(data["kind"]), str(data["summary"]), data.get("ran") is not False)


class ApprovalOnlyExecutor:
    """Performs nothing: the receipt records the approval and that no executor is set up."""

    def execute(
        self, spec: LoopSpec, action: ProposedAction, workspace: str | None
    ) -> ActionReceipt:
        return ActionReceipt(
            action.kind,
            # the crate's words after looop's: "no external action executor configured"
            f"nothing ran: loop `{spec.name}` was cleared to `{action.kind}`; "
            "no external action executor configured",
            ran=False,
        )


class CallbackActionExecutor:
    """Any function `(spec, action, workspace) -> ActionReceipt`; raise ActionError to fail."""

    def __init__(self, fn: Callable[[LoopSpec, ProposedAction, str | None], ActionReceipt]) -> None:
        self.fn = fn

    def execute(
        self, spec: LoopSpec, action: ProposedAction, workspace: str | None
    ) -> ActionReceipt:
        return self.fn(spec, action, workspace)


@dataclass(frozen=True)
class ActionCommand:
    command: str
    timeout_s: float = DEFAULT_ACTION_TIMEOUT_S


def action_commands(table: Any) -> dict[str, ActionCommand]:
    """The `[actions]` table of looop.toml: `{kind: {command = "…", timeout_s = N}}`."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConfigError("[actions] should be a table of action kinds")
    commands: dict[str, ActionCommand] = {}
    for kind, raw in table.items():
        where = f"actions.{kind}"
        entry = {"command": raw} if isinstance(raw, str) else raw
        if not isinstance(entry, dict):
            raise ConfigError(f"[{where}] should be a table with a `command`")
        unknown = sorted(set(entry) - {"command", "timeout_s"})
        if unknown:
            raise ConfigError(f"unknown key {where}.{unknown[0]}", "known keys: command, timeout_s")
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{where}.command should be a non-empty string")
        timeout = entry.get("timeout_s", DEFAULT_ACTION_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigError(f"{where}.timeout_s should be a positive number, got {timeout!r}")
        commands[str(kind)] = ActionCommand(command, float(timeout))
    return commands
