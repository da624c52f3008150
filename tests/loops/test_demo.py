"""A newcomer runs a ready-made loop offline: `looop new demo && looop run demo` on the
starter's defaults shows a round, its checker's verdict, its gate and an approval."""

from __future__ import annotations

from pathlib import Path

from looop_py import jsonio
from looop_py.engine import patterns
from looop_py.loops.specs import goal_text, spec_from_goal
from tests.conftest import invoke_looop


def test_the_demo_runs_a_whole_round_offline(tmp_path: Path) -> None:
    root = tmp_path / "ops"
    no_agents = {"PATH": "/usr/bin:/bin"}  # no agent CLI anywhere: the offline defaults
    assert invoke_looop("init", str(root), env=no_agents).returncode == 0
    made = invoke_looop("-C", str(root), "new", "demo", env=no_agents)
    assert made.returncode == 0, made.stderr
    assert "wrote goals/demo.md (L2-assisted, on demand)" in made.stdout
    assert "no `[actions.note]` command is configured" in made.stderr
    run = invoke_looop("-C", str(root), "run", "demo", env=no_agents)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "[L2-assisted] loop `demo` (escalated)" in out
    assert "proposal: note that this work dir has" in out  # the maker's
    assert "confirmed: this work dir has 2 goal(s) and 3 sensor(s)" in out  # the checker's
    assert "approval: waiting for a human (looop approve loop-demo-1)" in out
    approved = invoke_looop("-C", str(root), "approve", "loop-demo-1", env=no_agents)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith(
        "approved loop-demo-1; nothing ran: no `[actions.note]` command is configured"
    )


def test_the_demo_with_an_action_configured_runs_it_once_approved(tmp_path: Path) -> None:
    root = tmp_path / "ops"
    assert invoke_looop("init", str(root)).returncode == 0
    notes = tmp_path / "notes.md"
    with (root / "looop.toml").open("a") as f:
        f.write(f'\n[actions.note]\ncommand = "cat >> {notes}"\n')
    assert invoke_looop("-C", str(root), "new", "demo").stderr == ""  # nothing to warn about
    run = jsonio.loads(invoke_looop("-C", str(root), "run", "demo", "--json").stdout)
    assert run["outcome"] == "escalated" and run["warnings"] == []
    approved = invoke_looop("-C", str(root), "approve", "loop-demo-1")
    assert approved.returncode == 0, approved.stderr
    assert "nothing ran" not in approved.stdout and "proceeded" in approved.stdout
    assert notes.read_text().startswith("confirmed: this work dir has")  # on its stdin


def test_the_demo_goal_reads_back_as_written(tmp_path: Path) -> None:
    spec = patterns.demo()
    text = goal_text(spec)
    assert "maker: |\n" in text and "cadence" not in text.split("---")[1]
    path = tmp_path / "demo.md"
    path.write_text(text)
    assert spec_from_goal(path) == spec
    assert patterns.by_name("demo") == spec and spec not in patterns.catalogue()
