"""Action executors, with real child processes for the configured commands."""

from __future__ import annotations

import os
import time
import tomllib
from pathlib import Path

import psutil
import pytest

from looop_py import (
    ActionError,
    AllowlistGate,
    ApprovalOnlyExecutor,
    LoopEngine,
    LoopLevel,
    LoopSpec,
    ProposedAction,
    RoundOutcome,
    RoundReport,
)
from looop_py.engine.actions import ActionCommand, action_commands
from looop_py.engine.inproc import ScriptedWorkers, SharedWorkspace, done
from looop_py.errors import ConfigError
from looop_py.loops.executor import CommandActionExecutor
from tests.conftest import wait_for

SPEC = LoopSpec("pr-bot", "open PRs for verified fixes", LoopLevel.L3_UNATTENDED)
ACTION = ProposedAction("open-pr", "Fix the flaky test\n\nIt raced on the clock.", True)


def test_the_configured_command_runs_in_the_workspace_with_the_summary_on_stdin(
    tmp_path: Path,
) -> None:
    script = (
        'cat > summary.txt; printf "%s %s %s\\n" "$LOOOP_LOOP" "$LOOOP_ACTION_KIND" '
        '"$LOOOP_ACTION_VERIFIED" > env.txt; pwd > where.txt; '
        'echo "noise"; echo "https://example.invalid/pr/7"'
    )
    executor = CommandActionExecutor({"open-pr": script}, cwd=tmp_path / "elsewhere")
    receipt = executor.execute(SPEC, ACTION, str(tmp_path))
    assert receipt.kind == "open-pr" and receipt.summary == "https://example.invalid/pr/7"
    assert (tmp_path / "summary.txt").read_text() == ACTION.summary + "\n"
    assert (tmp_path / "env.txt").read_text() == "pr-bot open-pr 1\n"
    assert Path((tmp_path / "where.txt").read_text().strip()).resolve() == tmp_path.resolve()


def test_a_silent_command_gets_a_receipt_naming_it(tmp_path: Path) -> None:
    receipt = CommandActionExecutor({"open-pr": "true"}, cwd=tmp_path).execute(SPEC, ACTION, None)
    assert receipt.summary == "ran `true`"


def test_a_non_zero_exit_is_an_action_error_with_the_reason(tmp_path: Path) -> None:
    executor = CommandActionExecutor(
        {"open-pr": "echo 'gh: not logged in' >&2; exit 4"}, cwd=tmp_path
    )
    with pytest.raises(ActionError, match="exited 4: gh: not logged in"):
        executor.execute(SPEC, ACTION, None)


@pytest.mark.slow
def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    marker, child = tmp_path / "still-running", tmp_path / "child.pid"
    # /bin/sh runs it (no $BASHPID): the subshell's pid is the parent of a `sh` it starts.
    command = f"(sh -c 'echo $PPID' > {child}; sleep 0.6; touch {marker}) & sleep 30"
    executor = CommandActionExecutor({"open-pr": ActionCommand(command, 0.2)}, cwd=tmp_path)
    started = time.monotonic()
    with pytest.raises(ActionError, match="timeout"):
        executor.execute(SPEC, ACTION, None)
    assert time.monotonic() - started < 5

    def child_ended() -> bool:
        pid = child.read_text().strip() if child.exists() else ""
        return bool(pid) and not _running(int(pid))

    wait_for(child_ended, 1, "the background child to die with its group")
    assert not marker.exists()  # and it never will: the one that would touch it is gone


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_kinds_without_a_command_fall_back_or_fail(tmp_path: Path) -> None:
    receipt = CommandActionExecutor({}, cwd=tmp_path).execute(SPEC, ACTION, None)
    assert not receipt.ran and not ApprovalOnlyExecutor().execute(SPEC, ACTION, None).ran
    assert receipt.summary == "nothing ran: no `[actions.open-pr]` command is configured"
    with pytest.raises(ActionError, match=r"\[actions.open-pr\]"):
        CommandActionExecutor({}, cwd=tmp_path, fallback=None).execute(SPEC, ACTION, None)


def test_the_actions_table_of_looop_toml() -> None:
    table = tomllib.loads(
        '[actions.open-pr]\ncommand = "gh pr create --fill"\ntimeout_s = 120\n'
        '[actions.comment]\ncommand = "gh issue comment"\n'
    )["actions"]
    assert action_commands(table) == {
        "open-pr": ActionCommand("gh pr create --fill", 120.0),
        "comment": ActionCommand("gh issue comment", 300.0),
    }
    assert action_commands(None) == {}
    for bad in (
        {"x": {"command": ""}},
        {"x": {"command": "ok", "timeout_s": 0}},
        {"x": {"command": "ok", "retries": 2}},
        {"x": 5},
        "nope",
    ):
        with pytest.raises(ConfigError):
            action_commands(bad)


def test_a_failing_command_fails_the_round_and_a_passing_one_proceeds(tmp_path: Path) -> None:
    def run(command: str) -> RoundReport:
        return LoopEngine(
            SPEC.with_action_kind("open-pr"),
            ScriptedWorkers([done("patched"), done("tests pass")]),
            gate=AllowlistGate(["open-pr"]),
            executor=CommandActionExecutor(
                {"open-pr": command}, cwd=tmp_path, env=dict(os.environ)
            ),
            workspaces=SharedWorkspace(tmp_path),
        ).run_once()

    failed = run("echo 'remote rejected' >&2; exit 1")
    assert failed.outcome is RoundOutcome.FAILED
    assert "action executor failed: `echo" in (failed.error or "")
    assert "remote rejected" in failed.render()
    ok = run("echo opened")
    assert ok.outcome is RoundOutcome.PROCEEDED


def test_looop_toml_carries_the_actions_table(tmp_path: Path) -> None:
    from looop_py.workdir import config

    path = tmp_path / "looop.toml"
    path.write_text('[actions.open-pr]\ncommand = "gh pr create --fill"\ntimeout_s = 90\n')
    cfg = config.load(path)
    assert action_commands(cfg.actions) == {"open-pr": ActionCommand("gh pr create --fill", 90.0)}
    assert config.load(tmp_path / "looop.toml").actions == cfg.actions
    path.write_text("actions = 3\n")
    with pytest.raises(ConfigError):
        config.load(path)
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert config.load(empty).actions == {}
