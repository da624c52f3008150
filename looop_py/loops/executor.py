"""The action executor of a work dir: runs the command looop.toml names for an action kind.

    [actions.open-pr]
    command = "gh pr create --fill"
    timeout_s = 120

The command runs in the round's workspace, in its own process group under the
timeout, with the proposal's summary on stdin and these in its environment:
LOOOP_LOOP, LOOOP_ACTION_KIND, LOOOP_ACTION_VERIFIED (1/0), LOOOP_WORKSPACE.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from looop_py import procs
from looop_py.engine.actions import ActionCommand, ActionError, ActionReceipt, ApprovalOnlyExecutor
from looop_py.engine.levels import ProposedAction
from looop_py.engine.spec import LoopSpec

if TYPE_CHECKING:
    from looop_py.engine.protocols import ActionExecutor

_OUTPUT_CAP = 64 * 1024


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
        confirm: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        """`confirm(kind)`: called just before a command starts; raises to keep it from
        starting (a lost fence), else returns what to add to its environment (LOOOP_FENCE)."""
        self.commands = {
            kind: c if isinstance(c, ActionCommand) else ActionCommand(c)
            for kind, c in commands.items()
        }
        self.cwd = Path(cwd)
        self.env = dict(os.environ if env is None else env)
        self.fallback = fallback
        self.confirm = confirm

    def execute(
        self, spec: LoopSpec, action: ProposedAction, workspace: str | None
    ) -> ActionReceipt:
        configured = self.commands.get(action.kind)
        if configured is None:
            if self.fallback is not None:
                receipt = self.fallback.execute(spec, action, workspace)
                if receipt.ran:
                    return receipt
                return ActionReceipt(action.kind, not_configured(action.kind), ran=False)
            raise ActionError(
                f"no command is configured for action kind `{action.kind}`; "
                f'add [actions.{action.kind}] command = "…" to looop.toml'
            )
        cwd = Path(workspace) if workspace else self.cwd
        env = {
            **self.env,
            "LOOOP_LOOP": spec.name,
            "LOOOP_ACTION_KIND": action.kind,
            "LOOOP_ACTION_VERIFIED": "1" if action.verified else "0",
            "LOOOP_WORKSPACE": str(cwd),
        }
        if self.confirm is not None:
            env.update(self.confirm(action.kind))
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


def not_configured(kind: str) -> str:
    """What an approval of `kind` did when looop.toml names no command for it."""
    return f"nothing ran: no `[actions.{kind}]` command is configured"


def unrunnable_action(spec: LoopSpec, commands: Mapping[str, object]) -> str | None:
    """A warning for a loop whose approved action would run nothing (L2/L3, no command
    for its kind), for `looop new` and `looop run` to say before anyone approves it."""
    if spec.level.rank < 2 or spec.action_kind in commands:
        return None
    return (
        f"approving `{spec.name}`'s `{spec.action_kind}` will run nothing: no "
        f'`[actions.{spec.action_kind}]` command is configured (add `command = "…"` under'
        " it in looop.toml)"
    )


def _last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return _shorten(lines[-1], 300) if lines else ""


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
