"""Action executors: what happens once a proposal may proceed.

The gate decides whether an action is allowed; an executor performs it (open a
PR, commit, post a comment). The default executor performs nothing and says so
in its receipt, so a loop wired without one can never surprise anybody.
`CommandActionExecutor` runs the shell command configured for an action kind in
looop.toml:

    [actions.open-pr]
    command = "gh pr create --fill"
    timeout_s = 120

The command runs in the round's workspace, in its own process group under the
timeout, with the proposal's summary on stdin and these in its environment:
LOOOP_LOOP, LOOOP_ACTION_KIND, LOOOP_ACTION_VERIFIED (1/0), LOOOP_WORKSPACE.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from looop_py.engine.levels import ProposedAction
from looop_py.engine.spec import LoopSpec
from looop_py.errors import ConfigError

# typing is not imported at run time: the pulse may load this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.engine.protocols import ActionExecutor

DEFAULT_ACTION_TIMEOUT_S = 300.0
_OUTPUT_CAP = 64 * 1024


class ActionError(Exception):
    """The executor could not carry the action out; the round fails with this message."""


@dataclass(frozen=True)
class ActionReceipt:
    """Evidence that an approved action was handed to its executor, and what came of it."""

    kind: str
    summary: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "summary": self.summary}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ActionReceipt:
        return cls(str(data["kind"]), str(data["summary"]))


class ApprovalOnlyExecutor:
    """Performs nothing: the receipt records the approval and that no executor is set up."""

    def execute(
        self, spec: LoopSpec, action: ProposedAction, workspace: str | None
    ) -> ActionReceipt:
        return ActionReceipt(
            action.kind,
            f"loop `{spec.name}` was cleared to `{action.kind}`, "
            "but no action executor is configured, so nothing was run",
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


class CommandActionExecutor:
    """Runs the command configured for the action's kind; a non-zero exit is an ActionError.

    A kind with no command goes to `fallback` (ApprovalOnlyExecutor unless
    given; pass None to make a missing command an error).
    """

    def __init__(
        self,
        commands: Mapping[str, ActionCommand | str],
        *,
        cwd: str | Path,
        env: Mapping[str, str] | None = None,
        fallback: ActionExecutor | None = ApprovalOnlyExecutor(),  # noqa: B008 - stateless
    ) -> None:
        self.commands = {
            kind: c if isinstance(c, ActionCommand) else ActionCommand(c)
            for kind, c in commands.items()
        }
        self.cwd = Path(cwd)
        self.env = dict(os.environ if env is None else env)
        self.fallback = fallback

    def execute(
        self, spec: LoopSpec, action: ProposedAction, workspace: str | None
    ) -> ActionReceipt:
        configured = self.commands.get(action.kind)
        if configured is None:
            if self.fallback is not None:
                return self.fallback.execute(spec, action, workspace)
            raise ActionError(
                f"no command is configured for action kind `{action.kind}`; "
                f'add [actions.{action.kind}] command = "…" to looop.toml'
            )
        import tempfile

        from looop_py import procs

        cwd = Path(workspace) if workspace else self.cwd
        env = {
            **self.env,
            "LOOOP_LOOP": spec.name,
            "LOOOP_ACTION_KIND": action.kind,
            "LOOOP_ACTION_VERIFIED": "1" if action.verified else "0",
            "LOOOP_WORKSPACE": str(cwd),
        }
        with tempfile.TemporaryDirectory(prefix="looop-action-") as tmp:
            summary = Path(tmp) / "summary.txt"
            summary.write_text(action.summary + "\n", encoding="utf-8")
            result = procs.run(
                ["/bin/sh", "-c", configured.command],
                cwd=cwd,
                env=env,
                timeout_s=configured.timeout_s,
                cap=_OUTPUT_CAP,
                stdin=summary,
                stderr_tail=2048,
            )
        shown = _shorten(configured.command, 60)
        if result.timed_out:
            raise ActionError(
                f"`{shown}` ran past its {configured.timeout_s:g} s timeout and was killed"
            )
        if result.returncode is None:
            raise ActionError(f"`{shown}` could not start: {_last_line(result.stderr_tail)}")
        if result.exit_code != 0:
            detail = _last_line(result.stderr_tail) or _last_line(result.stdout)
            raise ActionError(
                f"`{shown}` exited {result.exit_code}" + (f": {detail}" if detail else "")
            )
        said = _last_line(result.stdout[:_OUTPUT_CAP])
        return ActionReceipt(action.kind, said or f"ran `{shown}`")


def _last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return _shorten(lines[-1], 300) if lines else ""


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
