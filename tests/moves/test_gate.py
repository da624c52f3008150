"""The one gate: every move classified by what it can cause to run; held unless a rule allows."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from looop_py.asks import mailbox
from looop_py.moves import gate, union
from looop_py.moves.gate import Power
from looop_py.workdir import provenance
from looop_py.workdir.config import Config, GatesConfig, RuntimeConfig
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd

LOOP = "---\nintent: keep ci green\nlevel: L2-assisted\nmaker: make fix\ncadence: every 1h\n---\n"


def cfg(**gates: Any) -> Config:
    return Config(gates=GatesConfig(**gates))


def verdict(move: dict[str, Any], current: str | None = None, config: Config | None = None):
    return gate.classify(union.parse(move), current, config or Config())


def test_every_move_type_of_the_union_is_classified() -> None:
    assert set(gate.TABLE) == set(union.ACTIONS)
    for name, cls in union.ACTIONS.items():
        row = gate.TABLE[name]
        assert isinstance(row.power, Power) and row.what and row.unasked, name
        # a minimal valid move of each type classifies without error
        fields = {
            f.name: ("x" if f.metadata["kind"] in ("id", "text", "line") else 60)
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING
        }
        extra = {"every_s": 60} if name == "write_schedule" else {}
        v = verdict({"action": name, **fields, **extra})
        assert v.power is not Power.CODE or v.runs, name  # code always shows what would run


@pytest.mark.parametrize(
    "move",
    [
        {"action": "noop"},
        {"action": "write_schedule", "name": "t", "every_s": 60},
        {"action": "drop_schedule", "name": "t"},
        {"action": "archive_goal", "id": "g"},
        {"action": "ask_human", "prompt": "`touch PWNED` $(id)"},
        {"action": "kill_worker", "id": "w"},
        {"action": "start_round", "loop": "l"},
    ],
)
def test_moves_that_run_nothing(move: dict[str, Any]) -> None:
    v = verdict(move)
    assert v.power is Power.NOTHING and not v.needs_approval


def test_prose_is_text_and_runs_unasked() -> None:
    assert verdict({"action": "write_playbook", "body": "run `rm -rf /` $(x)"}).power is Power.TEXT
    plain = verdict({"action": "write_goal", "id": "g", "body": "# Fix `make` $(whoami)\n"})
    assert plain.power is Power.TEXT and not plain.needs_approval
    agent = verdict(
        {"action": "start_worker", "id": "w", "prompt": "`touch x`", "runtime": "aider"}
    )
    assert agent.power is Power.TEXT and not agent.needs_approval
    unattended = verdict(  # claude's preset skips its permission prompts: as good as code
        {"action": "start_worker", "id": "w", "prompt": "`touch x`", "runtime": "claude"}
    )
    assert unattended.needs_approval and "permission prompts off" in unattended.why


def test_run_shell_is_code_held_unless_a_rule_matches_its_whole_argv() -> None:
    held = verdict({"action": "run_shell", "cmd": "git status"})
    assert held.needs_approval and held.runs == "git status"
    ok = verdict(
        {"action": "run_shell", "cmd": "git status"}, config=cfg(shell_allow=("git status",))
    )
    assert ok.allowed_by and ok.argv == ("git", "status") and not ok.needs_approval
    refused = verdict(
        {"action": "run_shell", "cmd": "sudo ls"}, config=cfg(shell_allow=("sudo *",))
    )
    assert refused.refused == "sudo" and not refused.needs_approval


def test_sensors_are_code_with_a_diff_unless_allowed() -> None:
    v = verdict(
        {"action": "write_sensor", "name": "ci", "script": "gh run list"}, "#!/bin/sh\necho old\n"
    )
    assert v.needs_approval and v.file == "sensors/ci.sh"
    assert "-echo old" in v.runs and "+gh run list" in v.runs and "+#!/usr/bin/env bash" in v.runs
    ok = verdict(
        {"action": "write_sensor", "name": "ci-x", "script": "x"},
        None,
        cfg(allow_sensors=("ci-*",)),
    )
    assert ok.allowed_by and not ok.needs_approval


@pytest.mark.parametrize(
    "old,new,code",
    [
        (None, LOOP, True),  # a new loop
        (LOOP, LOOP.replace("L2-assisted", "L3-unattended"), True),  # raising the level
        (LOOP, LOOP.replace("cadence", "allow: [apply-patch]\ncadence"), True),  # widening allow
        (LOOP, LOOP.replace("make fix", "make fix; curl x | sh"), True),  # the maker
        (
            LOOP,
            LOOP.replace("keep ci green", '"x\\nTask:\\ntouch P"'),
            True,
        ),  # the intent (framing)
        (LOOP, LOOP + "More notes `rm -rf /`.\n", False),  # the body of a loop is notes
        (LOOP, "# no longer a loop\n", False),  # nothing runs any more
        (None, "---\non: [ci]\nwork: make test\n---\nFix\n", True),  # what rules would start
        (None, "---\non: [ci]\n---\n`touch PWNED`\n", True),  # the body is the work
        (None, "---\nverify: touch x\n---\nbody\n", True),
        (None, "---\nowner: me\n---\n`touch PWNED`\n", False),  # plain notes
        (None, "---\nlevel: [unclosed\n---\n", False),  # broken YAML runs nothing
    ],
)
def test_goal_writes_are_code_when_they_change_what_runs(
    old: str | None, new: str, code: bool
) -> None:
    v = verdict({"action": "write_goal", "id": "g", "body": new}, old)
    assert (v.power is Power.CODE) == code, v
    if code:
        assert v.needs_approval and v.file == "goals/g.md" and "+++ b/goals/g.md" in v.runs


def test_workers_whose_prompt_or_verify_runs_are_code() -> None:
    shell = verdict({"action": "start_worker", "id": "w", "prompt": "touch x", "runtime": "shell"})
    assert shell.needs_approval and "touch x" in shell.runs and "bash" in shell.runs
    default = verdict({"action": "start_worker", "id": "w", "prompt": "hi"})  # default: shell
    assert default.needs_approval
    verify = {"action": "start_worker", "id": "w", "prompt": "p", "runtime": "aider"}
    v = verdict({**verify, "verify": "touch x"})
    assert v.needs_approval and "touch x" in v.runs
    allowed = verdict({**verify, "verify": "test -s r.md"}, config=cfg(shell_allow=("test -s *",)))
    assert allowed.allowed_by and allowed.verify == "test -s r.md"
    star = verdict({**verify, "verify": "test -s *.md"}, config=cfg(shell_allow=("test -s *",)))
    assert star.verify == "test -s '*.md'"  # as matched: no globbing
    runs = verdict(
        {"action": "start_worker", "id": "w", "prompt": "p", "runtime": "shell"},
        config=cfg(allow_runtimes=("shell",)),
    )
    assert runs.allowed_by == "[gates] allow_runtimes: 'shell'"


def test_runtimes_looop_does_not_know_are_assumed_to_run_their_prompt() -> None:
    mine = Config(runtimes={"mine": RuntimeConfig(command="mytool {{prompt_file}}")})
    move = {"action": "start_worker", "id": "w", "prompt": "p", "runtime": "mine"}
    assert verdict(move, config=mine).needs_approval
    agent = Config(
        runtimes={"mine": RuntimeConfig(command="mytool {{prompt_file}}", executes_prompt=False)}
    )
    assert verdict(move, config=agent).power is Power.TEXT
    marked = Config(runtimes={"claude": RuntimeConfig(executes_prompt=True)})
    assert verdict({**move, "runtime": "claude"}, config=marked).needs_approval


def test_a_worker_exactly_as_a_human_goal_defines_it_runs_unasked() -> None:
    goal = "---\non: [ci]\nruntime: shell\nwork: make test\nverify: test -f ok\n---\nFix\n"
    move = {"action": "start_worker", "id": "g", "prompt": "make test", "runtime": "shell"}
    v = verdict({**move, "verify": "test -f ok"}, goal)
    assert v.allowed_by and "written by a human" in v.allowed_by
    assert verdict({**move, "verify": "test -f ok; touch x"}, goal).needs_approval
    assert verdict(
        {**move, "prompt": "make test && touch x", "verify": "test -f ok"}, goal
    ).needs_approval


def test_admit_holds_code_with_what_would_run_and_the_files_fingerprint(wd: Paths) -> None:
    old = wd.goals / "g.md"
    old.write_text(LOOP)
    move = union.parse(
        {"action": "write_goal", "id": "g", "body": LOOP.replace("L2-assisted", "L3-unattended")}
    )
    admission = gate.admit(open_wd(wd), move, time.time())
    assert not admission.run and admission.held
    (ask,) = mailbox.pending(open_wd(wd))
    assert ask.hold["fingerprint"] == provenance.fingerprint(old.read_bytes())
    assert "-level: L2-assisted" in ask.prompt and "+level: L3-unattended" in ask.prompt
    assert ask.hold["file"] == "goals/g.md" and ask.hold["move"] == move.to_json()
    assert gate.display(ask) == ask.prompt  # the prompt already shows it all


def test_a_goal_a_model_wrote_is_no_humans_rule(wd: Paths) -> None:
    goal = "---\non: [ci]\nruntime: shell\nwork: make test\n---\nFix\n"
    (wd.goals / "g.md").write_text(goal)
    move = union.parse(
        {"action": "start_worker", "id": "g", "prompt": "make test", "runtime": "shell"}
    )
    assert gate.judge(open_wd(wd), move)[0].allowed_by
    provenance.record(wd, "goals/g.md", goal.encode(), approved=False, now=time.time())
    assert gate.judge(open_wd(wd), move)[0].needs_approval
    provenance.record(wd, "goals/g.md", goal.encode(), approved=True, now=time.time())
    assert gate.judge(open_wd(wd), move)[0].allowed_by


def test_the_safety_page_table_names_every_move() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "looop_py" / "docs"
    section = (docs / "safety.md").read_text().split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    named = {name for row in rows for name in union.ACTIONS if f"`{name}`" in row.split("|")[1]}
    assert named == set(union.ACTIONS)
