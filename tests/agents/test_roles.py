"""Maker and checker on two different real CLIs: each role's runtime, each role's spend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looop_py.workdir.paths import Paths
from looop_py.workers import records
from tests.agentclis import env_for, runtime_toml
from tests.conftest import invoke_looop, run_looop
from tests.fakemodel import FakeModel, Turn

pytestmark = [pytest.mark.agents, pytest.mark.slow, pytest.mark.timeout(240)]

DONE = '"$LOOOP_BIN" done --status done --summary "the fake model did it"'


def goal(wd: Paths, extra: str) -> None:
    (wd.goals / "welcome.md").unlink(missing_ok=True)
    (wd.goals / "review.md").write_text(
        "---\nintent: a second opinion\nlevel: L1\ncadence: daily 03:00\n"
        f"runtime: claude\n{extra}maker: Report what you found.\nchecker: Check the report.\n---\n"
    )


def test_an_unknown_role_runtime_fails_the_round_naming_it(wd: Paths) -> None:
    goal(wd, "maker_runtime: nosuchcli\n")
    r = invoke_looop("-C", str(wd.root), "run", "review", "--json")
    report = json.loads(r.stdout)
    assert report["outcome"] == "failed" and "nosuchcli" in report["error"]


def test_a_misspelt_role_key_is_an_error_naming_the_key(wd: Paths) -> None:
    goal(wd, "checker_runtim: codex\n")
    listed = json.loads(invoke_looop("-C", str(wd.root), "loops", "--json").stdout)
    assert "checker_runtim" in listed["errors"]["review"]


def test_a_codex_maker_and_a_claude_checker_each_run_on_their_own_cli(
    wd: Paths, tmp_path: Path
) -> None:
    goal(wd, "maker_runtime: codex\nchecker_runtime: claude\n")
    wd.config.write_text(wd.config.read_text() + runtime_toml("codex") + runtime_toml("claude"))
    with FakeModel(script=[Turn(shell=DONE), Turn(text="Reported.")]) as model:
        env = env_for("codex", model, tmp_path / "home") | env_for(
            "claude", model, tmp_path / "home"
        )
        r = run_looop("-C", str(wd.root), "run", "review", "--json", env=env, timeout=200)
        paths = [seen.path for seen in model.posts]
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["outcome"] == "reported", report
    rid = report["round"]
    maker = records.read_record(wd.sessions / f"{rid}.maker" / records.META)
    checker = records.read_record(wd.sessions / f"{rid}.checker" / records.META)
    assert (maker["runtime"], checker["runtime"]) == ("codex", "claude")
    assert maker["command"].startswith("codex ") and checker["command"].startswith("claude ")
    # each CLI spoke its own wire: the Responses API for codex, Messages for claude
    assert any(p.endswith("/responses") for p in paths)
    assert any(p.endswith("/messages") for p in paths)
    # spend per role: each worker's tokens are its own, and they add up to the model's
    assert report["maker"]["input_tokens"] > 0 and report["checker"]["input_tokens"] > 0
    both = sum(report[k]["input_tokens"] + report[k]["output_tokens"] for k in ("maker", "checker"))
    assert both == report["total_tokens"] == model.input_tokens + model.output_tokens
