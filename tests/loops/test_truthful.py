"""A loop's results say what happened, from the user's side: an approval that ran nothing
says so, warned before anyone approves; one live round per loop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from looop_py import jsonio
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop
from tests.loops.test_e2e import DONE, loop_goal, rounds_of, setup


def _looop(wd: Paths, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke_looop("-C", str(wd.root), *args)


def test_approving_an_action_nobody_configured_says_nothing_ran(wd: Paths) -> None:
    setup(wd)  # no [actions.apply-patch] in looop.toml
    loop_goal(wd, "sweep", "L2", f'{DONE} "patched it"', f'{DONE} "green"', action="apply-patch")
    run = invoke_looop("-C", str(wd.root), "run", "sweep")
    assert run.returncode == 0, run.stderr
    assert "warning: approving `sweep`'s `apply-patch` will run nothing" in run.stderr
    assert "no `[actions.apply-patch]` command is configured" in run.stderr
    assert "(escalated)" in run.stdout
    (r,) = rounds_of(wd)
    ask_id = r["ask"]
    approved = invoke_looop("-C", str(wd.root), "approve", ask_id)
    assert approved.returncode == 0, approved.stderr
    said = f"approved {ask_id}; nothing ran: no `[actions.apply-patch]` command is configured"
    assert approved.stdout.startswith(said), approved.stdout
    assert "proceeded" not in approved.stdout
    line = journal.tail(wd, 1)[0]
    assert f"· approved {ask_id}; nothing ran: no `[actions.apply-patch]`" in line
    assert "✓" not in line and "proceeded" not in line
    memory = jsonio.loads((wd.memory / "sweep.jsonl").read_text().splitlines()[-1])
    assert "was cleared after a human approved, but nothing ran" in memory["content"]
    (done,) = rounds_of(wd)
    assert done["action"]["ran"] is False
    shown = jsonio.loads(invoke_looop("-C", str(wd.root), "asks", "--json").stdout)
    assert shown["asks"] == []


def test_a_configured_action_is_not_warned_about_and_runs(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "applied"
    setup(wd, f'[actions.apply-patch]\ncommand = "touch {marker}"\n')
    loop_goal(wd, "sweep", "L2", f'{DONE} "patched it"', f'{DONE} "green"', action="apply-patch")
    run = invoke_looop("-C", str(wd.root), "run", "sweep", "--json")
    assert jsonio.loads(run.stdout)["warnings"] == [] and run.stderr == ""
    (r,) = rounds_of(wd)
    approved = invoke_looop("-C", str(wd.root), "approve", r["ask"])
    assert marker.exists() and "nothing ran" not in approved.stdout
    assert f"✓ approved {r['ask']}: round {r['id']}: proceeded" in journal.tail(wd, 1)[0]


def test_looop_new_warns_when_the_patterns_action_has_no_command(wd: Paths) -> None:
    wd.config.write_text('[runtimes.mine]\ncommand = "x {{prompt_file}}"\n')
    r = invoke_looop("-C", str(wd.root), "new", "ci-sweeper")
    assert r.returncode == 0, r.stderr
    assert "no `[actions.apply-patch]` command is configured" in r.stderr
    report = invoke_looop("-C", str(wd.root), "new", "daily-triage", "--json")
    assert jsonio.loads(report.stdout)["warnings"] == []  # L1: nothing is ever run
    deps = jsonio.loads(
        invoke_looop("-C", str(wd.root), "new", "dependency-sweeper", "--json").stdout
    )
    assert "[actions.open-pr]" in deps["warnings"][0]


def test_a_second_run_of_a_live_loop_is_refused_and_never_asks_twice(wd: Paths) -> None:
    setup(wd)
    loop_goal(wd, "sweep", "L2", f'{DONE} "patched it"', f'{DONE} "green"', action="apply-patch")
    assert invoke_looop("-C", str(wd.root), "run", "sweep").returncode == 0
    (first,) = rounds_of(wd)
    assert first["phase"] == "awaiting-approval"
    second = invoke_looop("-C", str(wd.root), "run", "sweep")
    assert second.returncode == 3, second.stderr
    assert f"loop sweep already has a live round ({first['id']}, awaiting-approval)" in (
        second.stderr
    )
    assert f"looop approve {first['ask']}" in second.stderr
    wrapped = jsonio.loads(invoke_looop("-C", str(wd.root), "run", "sweep", "--json").stdout)
    assert wrapped["exit_code"] == 3
    assert len(rounds_of(wd)) == 1
    denied = invoke_looop("-C", str(wd.root), "deny", first["ask"], "--reason", "no")
    assert denied.returncode == 0, denied.stderr
    # Nothing was queued behind the first round, so nothing asks again once it is denied.
    asks = jsonio.loads(invoke_looop("-C", str(wd.root), "asks", "--json").stdout)["asks"]
    assert [a for a in asks if a["kind"] == "approval"] == []
    assert len(rounds_of(wd)) == 1


def test_two_runs_at_once_start_one_round(wd: Paths) -> None:
    setup(wd)
    loop_goal(wd, "sweep", "L2", f'{DONE} "patched it"', f'{DONE} "green"', action="apply-patch")
    cmd = [sys.executable, "-m", "looop_py", "-C", str(wd.root), "run", "sweep", "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 3], outs
    assert len(rounds_of(wd)) == 1
    approvals = [
        a
        for a in jsonio.loads(invoke_looop("-C", str(wd.root), "asks", "--json").stdout)["asks"]
        if a["kind"] == "approval"
    ]
    assert len(approvals) == 1
