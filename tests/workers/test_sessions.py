"""Workers as real detached processes: exit codes, kill, caps, health, verify, worktrees."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from looop_py import identity, jsonio
from looop_py.beat.pulse import beat
from looop_py.cli.app import cli
from looop_py.coord.holders import own_holder
from looop_py.coord.reaper import reap as reap_claims
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.errors import WorkerRefused
from looop_py.loops.store import is_live
from looop_py.spend import ledger
from looop_py.workdir import config, journal
from looop_py.workdir.paths import Paths
from looop_py.workdir.shelf import FilesShelf
from looop_py.workers import kill, launch, reap, records
from tests.conftest import invoke_looop, open_wd, run_looop, wait_for


class Noop:
    name = "noop"

    def decide(self, request: DecideRequest) -> Decision:
        return Decision(move={"action": "noop"})


@pytest.fixture
def wwd(wd: Paths) -> Iterator[Paths]:
    """A work dir for workers: a short kill grace; every worker still alive is killed after."""
    wd.config.write_text("[workers]\nkill_grace_s = 0.3\n")
    yield wd
    for view in records.list_sessions(open_wd(wd), time.time()):
        if view.alive:
            kill.kill(wd, view.id)


def cfg(wd: Paths) -> config.Config:
    return config.load(wd.config)


def start(wd: Paths, sid: str, prompt: str, **kw: Any) -> records.Session:
    return launch.start(open_wd(wd), sid, prompt, now=time.time(), **kw)


def status(wd: Paths, sid: str) -> dict[str, Any]:
    data: dict[str, Any] = jsonio.read_json(wd.sessions / sid / "status.json", {})
    return data


def wait_ended(wd: Paths, sid: str, timeout: float = 10) -> dict[str, Any]:
    wait_for(lambda: status(wd, sid).get("state") in ("exited", "killed"), timeout, f"{sid} to end")
    return status(wd, sid)


def test_worker_outlives_the_looop_process_that_started_it(wwd: Paths) -> None:
    r = run_looop(
        "-C", str(wwd.root), "worker", "start", "w1", "-", "--json", input="sleep 0.6\nexit 7\n"
    )
    assert r.returncode == 0, r.stderr
    info = jsonio.loads(r.stdout)
    # The `looop` process has exited; the worker runs on, in its own session and group.
    assert identity.is_alive(info["pid"], info["create_time"])
    assert os.getsid(info["pid"]) == info["pid"] == os.getpgid(info["pid"])
    assert status(wwd, "w1")["state"] == "running"
    meta = jsonio.read_json(wwd.sessions / "w1" / "meta.json")
    assert {"id", "pid", "create_time", "command", "runtime", "started_at", "round"} <= set(meta)
    assert (wwd.sessions / "w1" / "prompt.md").read_text().startswith("# LOOOP WORKER CONTRACT")
    ended = wait_ended(wwd, "w1")
    assert ended["state"] == "exited" and ended["exit_code"] == 7 and ended["ended_at"]
    view = records.get(open_wd(wwd), "w1", time.time())
    assert (view.alive, view.health, view.exit_code) == (False, "dead", 7)


def test_worker_env_and_output_log(wwd: Paths) -> None:
    script = 'echo "$LOOOP_SESSION_ID|$LOOOP_DIR|$LOOOP_CLAIMS_DIR|$LOOOP_REPORTS_DIR|$PWD"\n'
    script += 'test -x "$LOOOP_BIN" && echo bin-ok\necho oops >&2\n'
    start(wwd, "env", script)
    wait_ended(wwd, "env")
    out = (wwd.sessions / "env" / "output.log").read_text().splitlines()
    root = str(wwd.root)
    assert out == [f"env|{root}|{root}/claims|{root}/reports|{root}", "bin-ok", "oops"]
    logs = CliRunner().invoke(cli, ["-C", root, "worker", "logs", "env", "-n", "1"])
    assert logs.output == "oops\n"


def test_what_a_worker_leaves_running_is_ended_after_its_exit(wwd: Paths) -> None:
    start(wwd, "messy", 'sleep 30 &\necho $! > "$LOOOP_DIR/bg.pid"\nexit 5')
    assert wait_ended(wwd, "messy")["exit_code"] == 5
    bg = int((wwd.root / "bg.pid").read_text())
    wait_for(lambda: identity.create_time(bg) is None, 5, "the background job to be ended")


def test_logs_follow_until_the_worker_ends(wwd: Paths) -> None:
    start(wwd, "chatty", "echo one\nsleep 0.4\necho two")
    r = invoke_looop("-C", str(wwd.root), "worker", "logs", "chatty", "-f")
    assert r.returncode == 0 and r.stdout == "one\ntwo\n"


def test_a_workers_claim_follows_the_worker(wwd: Paths) -> None:
    w = start(wwd, "holder", '"$LOOOP_BIN" claim repo > "$LOOOP_DIR/epoch"\nsleep 30')
    epoch = wwd.root / "epoch"
    wait_for(lambda: epoch.exists() and epoch.read_text().strip(), what="the claim")
    body = jsonio.read_json(wwd.claims / "repo.json")
    assert (body["session"], body["pid"], body["epoch"]) == ("holder", w.pid, 1)
    kill.kill(wwd, "holder")
    reaped = reap_claims(wwd, time.time(), partial(is_live, FilesShelf(wwd)))[-1]
    assert (reaped["event"], reaped["name"], reaped["reason"]) == (
        "claim_reaped",
        "repo",
        "holder-dead",
    )


def test_kill_ends_a_child_that_ignores_sigterm(wwd: Paths) -> None:
    prompt = (
        'bash -c \'trap "" TERM; echo $$ > "$LOOOP_DIR/child.pid"; '
        "while :; do sleep 0.05; done' &\nwait\n"
    )
    started = start(wwd, "stubborn", prompt)
    pid_file = wwd.root / "child.pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the child")
    child = int(pid_file.read_text())
    child_created = identity.create_time(child)
    assert child_created is not None
    t0 = time.monotonic()
    r = invoke_looop("-C", str(wwd.root), "worker", "kill", "stubborn", "--json")
    assert r.returncode == 0, r.stderr
    result = jsonio.loads(r.stdout)
    assert result["was_alive"] and result["forced"] and result["state"] == "killed"
    assert time.monotonic() - t0 < 8
    assert not identity.is_alive(child, child_created)
    assert not identity.is_alive(started.pid, started.create_time)
    assert jsonio.read_json(wwd.sessions / "stubborn" / "kill.json")["reason"] is None
    again = kill.kill(wwd, "stubborn")  # killing a dead worker is harmless
    assert not again.was_alive and again.state == "killed"


def test_fleet_cap_live_ids_and_reusing_a_dead_id(wwd: Paths) -> None:
    wwd.config.write_text("[workers]\nmax_live = 2\nkill_grace_s = 0.3\n")
    start(wwd, "a", "echo first-generation\nsleep 30")
    start(wwd, "b", "sleep 30")
    with pytest.raises(WorkerRefused, match=r"fleet cap reached: 2 live workers \(max_live = 2\)"):
        start(wwd, "c", "sleep 30")
    with pytest.raises(WorkerRefused, match="worker a is alive"):
        start(wwd, "a", "sleep 30")
    refused = invoke_looop("-C", str(wwd.root), "worker", "start", "c", "sleep 1")
    assert refused.returncode == 1 and "fleet cap" in refused.stderr
    kill.kill(wwd, "a")
    start(wwd, "c", "sleep 30")
    kill.kill(wwd, "b")
    start(wwd, "a", "echo second-generation\nsleep 30")  # a is dead: its leftovers go first
    wait_for(lambda: "second" in (wwd.sessions / "a" / "output.log").read_text())
    assert "first-generation" not in (wwd.sessions / "a" / "output.log").read_text()
    assert not (wwd.sessions / "a" / "kill.json").exists()
    assert records.live_count(open_wd(wwd), time.time()) == 2


def test_recycled_pid_is_dead_and_housekeeping_records_and_prunes(wwd: Paths) -> None:
    me = own_holder()
    d = wwd.sessions / "ghost"
    d.mkdir()
    jsonio.write_json(
        d / "meta.json",
        {"id": "ghost", "pid": me.pid, "create_time": me.create_time - 100, "started_at": 1.0},
    )
    jsonio.write_json(d / "status.json", {"state": "running", "exit_code": None})
    now = time.time()
    view = records.get(open_wd(wwd), "ghost", now)
    assert (view.alive, view.health, view.state, view.lost) == (False, "dead", "exited", True)
    events = reap.housekeeping(open_wd(wwd), now)
    assert [e["event"] for e in events] == ["worker_lost", "worker_ended"]
    assert status(wwd, "ghost")["lost"] is True and status(wwd, "ghost")["finalized_at"] == now
    assert reap.housekeeping(open_wd(wwd), now + 60) == []  # settled once only
    pruned = reap.housekeeping(open_wd(wwd), now + 3 * 86400 + 1)
    assert pruned == [{"event": "session_pruned", "id": "ghost"}]
    assert not d.exists()


def test_health_busy_stuck_waiting_ask(wwd: Paths) -> None:
    start(wwd, "slow", "sleep 30")
    now = time.time()
    assert records.get(open_wd(wwd), "slow", now).health == "busy"
    log = wwd.sessions / "slow" / "output.log"
    os.utime(log, (now - 901, now - 901))  # no output for 15 minutes
    assert records.get(open_wd(wwd), "slow", now).health == "stuck"
    jsonio.write_json(wwd.asks / "slow-1.json", {"id": "slow-1", "asker": "slow", "prompt": "?"})
    assert records.get(open_wd(wwd), "slow", now).health == "waiting-ask"
    jsonio.write_json(wwd.answers / "slow-1.json", {"id": "slow-1", "answer": "yes"})
    assert records.get(open_wd(wwd), "slow", now).health == "stuck"
    listed = jsonio.loads(invoke_looop("-C", str(wwd.root), "workers", "--json").stdout)
    assert [(w["id"], w["alive"]) for w in listed["workers"]] == [("slow", True)]
    assert listed["live"] == 1 and listed["max_live"] == 8


def test_verify_verdict_reaches_sys_sessions_and_wakes_the_loop(wwd: Paths) -> None:
    start(wwd, "good", 'touch "$LOOOP_REPORTS_DIR/good.txt"', verify="test -f reports/good.txt")
    start(wwd, "bad", "exit 0", verify="echo still broken; exit 3")
    wait_ended(wwd, "good")
    wait_ended(wwd, "bad")
    # A beat with no verify time left: the workers' ends are committed, verdicts not yet.
    wwd.config.write_text("[workers]\nverify_budget_s = 0\n")
    assert beat(open_wd(wwd), decider=Noop()).outcome == "decided"
    assert not (wwd.sessions / "good" / "verify.json").exists()
    wwd.config.write_text("[workers]\n")
    second = beat(open_wd(wwd), decider=Noop())
    # The verdicts alone woke the loop.
    assert second.outcome == "decided"
    assert [c.item for c in second.changed] == ["snap:sys-sessions"]
    rows = jsonio.read_json(wwd.snapshot("sys-sessions"))["signal"]
    assert [(r["id"], r["verify"]) for r in rows] == [("bad", "fail"), ("good", "pass")]
    detail = jsonio.read_json(wwd.snapshot("sys-sessions"))["detail"]
    assert "still broken" in detail["workers"]["bad"]["verify_output"]
    verified = [e for e in journal.recent_events(wwd) if e["event"] == "worker_verified"]
    assert sorted((e["id"], e["verdict"], e["exit_code"]) for e in verified) == [
        ("bad", "fail", 3),
        ("good", "pass", 0),
    ]
    assert beat(open_wd(wwd), decider=Noop()).outcome == "skipped"  # verify ran once; nothing new


def test_done_report_and_usage_from_the_stream(wwd: Paths) -> None:
    result_line = (
        '{"type":"result","subtype":"success","total_cost_usd":0.25,'
        '"usage":{"input_tokens":100,"cache_read_input_tokens":5,"output_tokens":20}}'
    )
    wwd.config.write_text(
        "[runtimes.fake]\n"
        f"command = '''cat {{{{prompt_file}}}} > /dev/null; echo '{result_line}' '''\n"
        'usage = "claude"\n'
    )
    start(wwd, "metered", "do the thing", runtime="fake")
    script = '"$LOOOP_BIN" done --status done-with-concerns --summary "half" --tokens 500'
    start(wwd, "reporter", script)
    wait_ended(wwd, "metered")
    wait_ended(wwd, "reporter")
    events = reap.housekeeping(open_wd(wwd), time.time())
    metered = next(e for e in events if e["id"] == "metered")
    assert metered["usage"] == {
        "input_tokens": 105,
        "output_tokens": 20,
        "total_tokens": 125,
        "cache_read_tokens": 5,
        "cache_write_tokens": 0,
        "cost_usd": 0.25,
        "source": "stream",
    }
    view = records.get(open_wd(wwd), "reporter", time.time())
    assert view.result is not None and view.result["status"] == "done-with-concerns"
    assert view.usage == {"total_tokens": 500, "cost_usd": None, "source": "worker"}
    # Both are other workers' spend on the one ledger; the worker's own count is charged too.
    by_source = ledger.load(open_wd(wwd)).by_source
    assert by_source["workers"]["tokens"] == 125 + 500
    assert by_source["workers"]["usd"] == 0.25
    outside = invoke_looop("-C", str(wwd.root), "done", env={"LOOOP_SESSION_ID": ""})
    assert outside.returncode == 2 and "inside a worker" in outside.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_worktree_kept_when_it_holds_commits_else_removed(wwd: Paths, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README").write_text("hi\n")
    subprocess.run([*git, "-C", str(repo), "add", "."], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "init"], check=True)
    wwd.config.write_text(f'[workers]\nrepo = "{repo}"\n')
    commit = "git -c user.name=t -c user.email=t@example.com commit -q --allow-empty -m work"
    keep = start(
        wwd, "keep", f'{commit}\npwd > "$LOOOP_REPORTS_DIR/keep.txt"', workspace="git-worktree"
    )
    start(wwd, "drop", "echo scratch > notes.txt", workspace="git-worktree")
    wt_root = wwd.root / ".worktrees"
    assert keep.cwd == wt_root / "keep"
    wait_ended(wwd, "keep")
    wait_ended(wwd, "drop")
    assert (wwd.reports / "keep.txt").read_text().strip() == str(wt_root / "keep")
    events = {e["id"]: e for e in reap.housekeeping(open_wd(wwd), time.time())}
    assert events["keep"]["worktree"] == "kept" and events["drop"]["worktree"] == "removed"
    assert (wt_root / "keep").is_dir() and not (wt_root / "drop").exists()
    branches = subprocess.run(
        ["git", "-C", str(repo), "branch", "--format=%(refname:short)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(branches) == ["looop/keep", "main"]
    listed = jsonio.loads(invoke_looop("-C", str(wwd.root), "workers", "--json").stdout)
    assert [(k["id"], k["branch"]) for k in listed["kept_worktrees"]] == [("keep", "looop/keep")]
    assert "commit(s) on no other branch" in listed["kept_worktrees"][0]["reason"]
    # A new worker with the same id carries on in the kept worktree.
    again = start(wwd, "keep", "git log --oneline | wc -l > count.txt", workspace="git-worktree")
    wait_ended(wwd, "keep")
    assert again.cwd == wt_root / "keep"
    assert (wt_root / "keep" / "count.txt").read_text().strip() == "2"


def test_worker_subcommands_have_help_with_an_example() -> None:
    for sub in ("start", "kill", "logs"):
        result = CliRunner().invoke(cli, ["worker", sub, "--help"])
        assert result.exit_code == 0 and "Example" in result.output, sub
