"""CLI wiring through click's CliRunner (no child process): options, --json, errors, exit codes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.cli.app import cli
from looop_py.cli.manual import TOPICS, page
from looop_py.schedules import timers
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd


def looop(wd: Paths | None, *args: str, input: str | None = None) -> Result:
    where = ["-C", str(wd.root)] if wd else []
    return CliRunner().invoke(cli, [*where, *args], input=input)


def as_json(result: Result) -> Any:
    return jsonio.loads(result.stdout)


def _all_commands() -> Iterator[tuple[str, click.Command]]:
    def walk(prefix: str, group: click.Group) -> Iterator[tuple[str, click.Command]]:
        for name, command in sorted(group.commands.items()):
            path = f"{prefix} {name}".strip()
            yield path, command
            if isinstance(command, click.Group):
                yield from walk(path, command)

    yield from walk("", cli)


# Groups of other commands: each of theirs takes --json (a log, the manual and a script too).
NOT_REPORTING = {"worker", "decider", "schedule", "cron", "fence"}


@pytest.mark.parametrize("path", [p for p, _ in _all_commands()])
def test_every_command_and_subcommand_has_an_example(path: str) -> None:
    result = CliRunner().invoke(cli, [*path.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output, path


def test_every_command_that_reports_takes_json() -> None:
    missing = [
        path
        for path, command in _all_commands()
        if path not in NOT_REPORTING and "--json" not in {o for p in command.params for o in p.opts}
    ]
    assert missing == []


def test_errors_under_json_are_one_object_on_stdout_with_the_same_exit_code(
    tmp_path: Path,
) -> None:
    plain = looop(None, "-C", str(tmp_path), "status")
    wrapped = looop(None, "-C", str(tmp_path), "status", "--json")
    assert plain.exit_code == wrapped.exit_code == 2
    assert "is not a looop work dir" in plain.stderr and plain.stdout == ""
    error = as_json(wrapped)
    assert set(error) == {"error", "hint", "exit_code"} and error["exit_code"] == 2
    assert "is not a looop work dir" in error["error"] and "looop init" in error["hint"]
    assert wrapped.stderr == ""


def test_a_claim_someone_else_holds_exits_4_with_or_without_json(wd: Paths) -> None:
    assert looop(wd, "claim", "repo", "--session", "a").exit_code == 0
    plain = looop(wd, "claim", "repo", "--session", "b")
    wrapped = looop(wd, "claim", "repo", "--session", "b", "--json")
    assert plain.exit_code == wrapped.exit_code == 4
    assert as_json(wrapped)["exit_code"] == 4


def test_a_bug_under_json_is_an_object_too_and_is_logged(
    wd: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looop_py.beat import views

    def boom(paths: Paths) -> dict[str, object]:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(views, "status", boom)
    result = looop(wd, "status", "--json")
    assert result.exit_code == 70
    error = as_json(result)
    assert "internal error" in error["error"] and str(wd.error_log) in error["hint"]
    assert "kaboom" in wd.error_log.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["journal", "-n", "0"],
        ["journal", "-n", "-1"],
        ["journal", "-n", "x"],
        ["worker", "logs", "w", "-n", "0"],
        ["status", "--no-such-flag"],
        ["no-such-command"],
        ["completion", "tcsh"],
        ["help", "no-such-topic"],
        ["answer", "human-1", ""],
    ],
)
def test_usage_errors_exit_2_with_or_without_json(wd: Paths, args: list[str]) -> None:
    plain = looop(wd, *args)
    assert plain.exit_code == 2, plain.output
    assert "Traceback" not in plain.output and plain.stdout == ""
    wrapped = looop(wd, *args, "--json")
    assert wrapped.exit_code == 2
    error = as_json(wrapped)
    assert error["exit_code"] == 2 and error["error"]


def test_a_closed_pipe_ends_quietly(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    from looop_py.cli import output

    def gone(lines: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(output, "show", gone)
    result = looop(wd, "status")
    assert result.exit_code == 0 and result.output == ""
    assert not wd.error_log.exists()


def test_reporting_commands_answer_in_json(wd: Paths, tmp_path: Path) -> None:
    made = as_json(looop(None, "init", str(tmp_path / "new"), "--json"))
    assert "looop.toml" in made["created"] and made["kept"] == []
    assert as_json(looop(wd, "journal", "--json")) == {"lines": []}
    assert len(as_json(looop(wd, "patterns", "--json"))["patterns"]) == 8

    refused = looop(wd, "new", "ci-sweeper", "--json")
    assert refused.exit_code == 2 and "default_runtime" in as_json(refused)["hint"]
    wd.config.write_text(wd.config.read_text() + '\n[workers]\ndefault_runtime = "claude"\n')
    new = looop(wd, "new", "ci-sweeper", "--name", "ci-main", "--json")
    assert as_json(new)["goal"] == "goals/ci-main.md" and wd.goal("ci-main").exists()
    assert "runtime: claude" in wd.goal("ci-main").read_text()
    again = looop(wd, "new", "ci-sweeper", "--name", "ci-main", "--json")
    assert again.exit_code == 2 and "already exists" in as_json(again)["error"]

    got = as_json(looop(wd, "claim", "repo", "--session", "s", "--json"))
    assert (got["name"], got["epoch"], got["action"]) == ("repo", 1, "acquired")
    gone = as_json(looop(wd, "unclaim", "repo", "--session", "s", "--json"))
    assert gone["name"] == "repo" and gone["released"]["epoch"] == 1

    missing = looop(wd, "done", "--session", "nobody", "--json")
    assert missing.exit_code == 2 and "no worker" in as_json(missing)["error"]
    killed = looop(wd, "worker", "kill", "nobody", "--json")
    assert killed.exit_code == 2 and "no worker" in as_json(killed)["error"]


def test_answer_approve_and_deny_answer_in_json(wd: Paths) -> None:
    now = time.time()
    question = mailbox.open_ask(open_wd(wd), prompt="Which DB?", asker="w1", now=now)
    answered = as_json(looop(wd, "answer", question.id, "staging", "--json"))
    assert answered["id"] == question.id and answered["answer"] == "staging"

    def approval(cmd: str) -> str:
        """Held by the gate, as the pulse holds it: the ask shows what would run."""
        from looop_py.moves import gate, union

        move = union.parse({"action": "run_shell", "cmd": cmd})
        held = gate.admit(open_wd(wd), move, now).held
        assert held is not None
        return held

    ok = looop(wd, "approve", approval("true"), "--json")
    assert ok.exit_code == 0 and as_json(ok)["verdict"] == "approved"
    assert as_json(ok)["note"].startswith("ran")
    failed = looop(wd, "approve", approval("false"), "--json")
    assert failed.exit_code == 1 and as_json(failed)["note"].startswith("failed")
    denied = looop(wd, "deny", approval("true"), "--reason", "freeze", "--json")
    assert as_json(denied) | {"answered_at": 0} == {
        "id": "decider-3",
        "answer": "denied",
        "answered_at": 0,
        "verdict": "denied",
        "note": "freeze",
    }
    text = looop(wd, "deny", approval("true"))
    assert text.stdout == "denied decider-4\n"


def test_schedules_lists_timers_and_drop_removes_one(wd: Paths) -> None:
    assert looop(wd, "schedules").stdout == "no schedules\n"
    now = time.time()
    timers.write(open_wd(wd), "nightly", now=now, cron="0 3 * * *")
    timers.write(open_wd(wd), "soon", now=now, in_s=600)
    listed = as_json(looop(wd, "schedules", "--json"))["schedules"]
    assert [(s["name"], s["kind"]) for s in listed] == [("nightly", "cron"), ("soon", "once")]
    assert listed[1]["signal"] == "pending" and 590 <= listed[1]["due_in_s"] <= 600
    assert "cron 0 3 * * *" in looop(wd, "schedules").stdout

    assert as_json(looop(wd, "schedule", "drop", "soon", "--json")) == {
        "name": "soon",
        "dropped": True,
    }
    again = looop(wd, "schedule", "drop", "soon")
    assert again.exit_code == 2 and "no schedule 'soon'" in again.stderr
    assert [s["name"] for s in as_json(looop(wd, "schedules", "--json"))["schedules"]] == [
        "nightly"
    ]


def test_prune_removes_dead_sessions_old_runs_and_archives_old_rounds(wd: Paths) -> None:
    now = time.time()
    # a dead, settled worker session (no pid: it never started; ended a minute ago)
    dead = wd.sessions / "w-dead"
    dead.mkdir(parents=True)
    jsonio.write_json(dead / "meta.json", {"id": "w-dead", "started_at": now - 120})
    jsonio.write_json(
        dead / "status.json",
        {"state": "exited", "exit_code": 0, "ended_at": now - 60, "finalized_at": now - 59},
    )
    wd.config.write_text('[decider]\nbackend = "noop"\n[limits]\nruns_keep = 2\n')
    for i in range(4):
        (wd.runs / f"2026010{i}-000000.000000000-1").mkdir(parents=True)
    wd.rounds.mkdir(exist_ok=True)
    jsonio.write_json(wd.rounds / "r-old.json", {"phase": "done", "ended_at": now - 7200})
    jsonio.write_json(wd.rounds / "r-new.json", {"phase": "done", "ended_at": now - 60})
    jsonio.write_json(wd.rounds / "r-live.json", {"phase": "maker"})

    result = as_json(looop(wd, "prune", "--json"))
    assert result["sessions_removed"] == ["w-dead"] and not dead.exists()
    assert result["runs_removed"] == ["20260100-000000.000000000-1", "20260101-000000.000000000-1"]
    assert sorted(p.name for p in wd.runs.iterdir()) == [
        "20260102-000000.000000000-1",
        "20260103-000000.000000000-1",
    ]
    assert result["rounds_archived"] == ["r-old"]
    assert (wd.rounds / "done" / "r-old.json").exists() and (wd.rounds / "r-new.json").exists()
    assert looop(wd, "prune").stdout == "nothing to prune\n"


def test_help_lists_topics_and_prints_each_page() -> None:
    listing = looop(None, "help")
    assert listing.exit_code == 0
    for topic in TOPICS:
        assert f"  {topic} " in listing.stdout
        printed = looop(None, "help", topic)
        assert printed.exit_code == 0 and printed.stdout == page(topic)
    assert "status [OPTIONS]" in looop(None, "help", "status").stdout


def test_the_manual_names_every_exit_code_the_cli_uses() -> None:
    from looop_py import errors

    text = page("cli").split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    codes = {
        c.exit_code
        for c in vars(errors).values()
        if isinstance(c, type) and hasattr(c, "exit_code")
    }
    for code in codes | {0, 70, 130}:
        assert f"\n| {code} | " in text, code


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_clicks_own_script(shell: str, monkeypatch: pytest.MonkeyPatch) -> None:
    result = looop(None, "completion", shell)
    assert result.exit_code == 0 and "_LOOOP_COMPLETE" in result.stdout
    monkeypatch.setenv("_LOOOP_COMPLETE", f"{shell}_source")
    native = CliRunner().invoke(cli, [], prog_name="looop")
    assert native.stdout == result.stdout
