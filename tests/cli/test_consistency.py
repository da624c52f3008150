"""One behaviour per verb, seen from the user's side: the same option in either place, one
exit code per class of error, output that says what happened, --json everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.cli.extras import hint_for, install_hint
from looop_py.ops import doctor
from looop_py.ops.doctor import Verdict
from looop_py.workdir import config as config_mod
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, run_looop, wait_for


def _looop(wd: Paths, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return invoke_looop("-C", str(wd.root), *args, input=input)


# -- -C DIR after the verb -------------------------------------------------------------------


def test_dir_after_the_verb_is_the_same_as_before_it(wd: Paths, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bad = invoke_looop("status", "-C", str(elsewhere), cwd=tmp_path)
    assert bad.returncode == 2 and "is not a looop work dir" in bad.stderr  # it was read
    for args in (
        ["status", "--json", "-C", str(wd.root)],
        ["status", "--json", f"--dir={wd.root}"],
        ["worker", "start", "w1", "true", "--json", "-C", str(wd.root)],
    ):
        r = invoke_looop(*args, cwd=elsewhere)
        assert r.returncode == 0, (args, r.stderr)
    assert jsonio.loads(invoke_looop("status", "--json", "-C", str(wd.root)).stdout)[
        "work_dir"
    ] == str(wd.root)
    assert (wd.sessions / "w1").is_dir()


def test_pulse_takes_dir_after_the_verb_in_a_real_process(wd: Paths, tmp_path: Path) -> None:
    r = run_looop("pulse", "-C", str(wd.root), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert jsonio.loads(r.stdout)["outcome"] == "decided"
    assert wd.events.exists()


# -- one exit code per class -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "stdin", "said"),
    [
        (["worker", "start", "w1", "echo hi", "--runtime", "bogus"], None, "unknown runtime"),
        (["worker", "start", "w1", "   "], None, "the prompt is empty"),
        (["worker", "start", "w1", "-"], "\n", "the prompt is empty"),
        (["worker", "start", "w1", "true", "--workspace", "nope"], None, "'nope' is not one of"),
        (["ask", "--prompt", ""], None, "an ask needs a prompt"),
    ],
)
def test_bad_requests_are_usage_errors_exit_2(
    wd: Paths, args: list[str], stdin: str | None, said: str
) -> None:
    plain = _looop(wd, *args, input=stdin)
    assert plain.returncode == 2, plain.stderr
    assert said in plain.stderr and plain.stdout == ""
    wrapped = _looop(wd, *args, "--json", input=stdin)
    assert wrapped.returncode == 2 and jsonio.loads(wrapped.stdout)["exit_code"] == 2
    assert not list(wd.sessions.glob("w1"))  # nothing started


# -- claim --renew ---------------------------------------------------------------------------


def test_renew_fails_on_a_lapsed_lease_and_never_retakes_it(wd: Paths) -> None:
    took = _looop(wd, "claim", "deploy", "--session", "me", "--ttl", "0.3", "--json")
    assert took.returncode == 0, took.stderr
    epoch = jsonio.loads(took.stdout)["epoch"]

    def lapsed() -> bool:
        view = jsonio.loads(_looop(wd, "claims", "--json").stdout)
        return not any(c["live"] for c in view["claims"])

    wait_for(lapsed, 10, "the ttl to run out")
    renewed = _looop(wd, "claim", "deploy", "--session", "me", "--renew")
    assert renewed.returncode == 4, renewed.stderr
    assert "cannot renew deploy: its ttl ran out" in renewed.stderr
    assert renewed.stdout == ""  # no epoch printed: the caller must not proceed
    never = _looop(wd, "claim", "never-taken", "--session", "me", "--renew", "--json")
    assert never.returncode == 4 and "nobody holds it" in jsonio.loads(never.stdout)["error"]
    # A plain claim takes it again, with a new epoch; a renew of a live one extends it.
    again = _looop(wd, "claim", "deploy", "--session", "me", "--ttl", "60", "--json")
    assert jsonio.loads(again.stdout)["epoch"] == epoch + 1
    extended = _looop(wd, "claim", "deploy", "--session", "me", "--renew", "--json")
    assert extended.returncode == 0 and jsonio.loads(extended.stdout)["action"] == "renewed"


def test_renew_of_a_lease_another_holder_has_fails(wd: Paths) -> None:
    assert _looop(wd, "claim", "db", "--session", "them").returncode == 0
    r = _looop(wd, "claim", "db", "--session", "me", "--renew")
    assert r.returncode == 4 and "db is held by session them" in r.stderr


# -- withdraw --------------------------------------------------------------------------------


def test_withdraw_says_it_withdrew(wd: Paths) -> None:
    from looop_py.asks import mailbox
    from tests.conftest import open_wd

    ask = mailbox.open_ask(open_wd(wd), prompt="merge?", asker="human", now=time.time())
    r = _looop(wd, "withdraw", ask.id, "--reason", "the PR was closed")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"withdrew {ask.id}: the PR was closed\n"
    assert "answered" not in r.stdout
    other = mailbox.open_ask(open_wd(wd), prompt="deploy?", asker="human", now=time.time())
    assert _looop(wd, "withdraw", other.id).stdout == f"withdrew {other.id}\n"
    again = _looop(wd, "withdraw", other.id)
    assert again.returncode == 2 and "already answered" in again.stderr


# -- --json on every verb --------------------------------------------------------------------


def test_worker_logs_json_is_the_output_as_text(wd: Paths) -> None:
    script = "printf 'line one\\n'; printf '\\xff bad byte\\n'; echo done"
    assert _looop(wd, "worker", "start", "w1", "-", input=script).returncode == 0

    def ended() -> bool:
        view = jsonio.loads(_looop(wd, "workers", "--all", "--json").stdout)
        return any(w["id"] == "w1" and not w["alive"] for w in view["workers"])

    wait_for(ended, 20, "the worker to end")
    got = jsonio.loads(_looop(wd, "worker", "logs", "w1", "--json").stdout)
    assert got["id"] == "w1" and "line one\n" in got["text"] and "\ufffd bad byte" in got["text"]
    tail = jsonio.loads(_looop(wd, "worker", "logs", "w1", "-n", "1", "--json").stdout)
    assert tail["text"] == "done\n"
    followed = _looop(wd, "worker", "logs", "w1", "-f", "--json").stdout.splitlines()
    assert "".join(json.loads(line)["text"] for line in followed) == got["text"]
    missing = _looop(wd, "worker", "logs", "nope", "--json")
    assert missing.returncode == 2 and jsonio.loads(missing.stdout)["exit_code"] == 2


def test_help_and_completion_answer_in_json() -> None:
    listing = jsonio.loads(invoke_looop("help", "--json").stdout)
    assert "cli" in listing["topics"] and listing["topics"]["sensors"]
    page = jsonio.loads(invoke_looop("help", "cli", "--json").stdout)
    assert page["topic"] == "cli" and "\n| 70 | " in page["text"]
    command = jsonio.loads(invoke_looop("help", "status", "--json").stdout)
    assert "status [OPTIONS]" in command["text"]
    script = jsonio.loads(invoke_looop("completion", "bash", "--json").stdout)
    assert script["shell"] == "bash" and "_LOOOP_COMPLETE" in script["script"]
    assert script["script"] == invoke_looop("completion", "bash").stdout


def test_up_json_prints_one_object_per_line(wd: Paths) -> None:
    unit = _looop(wd, "up", "--print-unit", "--json")
    assert unit.returncode == 0 and "[Service]" in jsonio.loads(unit.stdout)["unit"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "up", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first == {"up": str(wd.root), "interval_s": 60.0}
        beat = json.loads(proc.stdout.readline())  # the first beat, at once
        assert beat["outcome"] == "decided"
    finally:
        assert _looop(wd, "down").returncode == 0
        proc.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


# -- workers --all ---------------------------------------------------------------------------


def test_workers_table_fits_long_ids_and_its_count_is_on_stdout(wd: Paths) -> None:
    long_id = "a-worker-with-a-very-long-id-x"  # 30 characters
    for wid in (long_id, "w1"):
        assert _looop(wd, "worker", "start", wid, "true").returncode == 0

    def both_ended() -> bool:
        view = jsonio.loads(_looop(wd, "workers", "--all", "--json").stdout)
        return sum(not w["alive"] for w in view["workers"]) == 2

    wait_for(both_ended, 20, "both workers to end")
    r = _looop(wd, "workers", "--all")
    assert r.stderr == ""
    head, *rows, count = r.stdout.splitlines()
    assert count.endswith(" live")
    column = head.index("HEALTH")
    for row in rows:
        assert row[column - 1] == " " and row[column:].split()[0] in ("dead", "done", "idle")
    assert {row.split()[0] for row in rows} == {long_id, "w1"}


# -- doctor ----------------------------------------------------------------------------------


def test_doctor_fails_a_runtime_whose_script_is_missing(wd: Paths) -> None:
    wd.config.write_text(
        '[decider]\nbackend = "noop"\n'
        "[runtimes.mine]\n"
        'command = "bash scripts/run-agent.sh --model x {{prompt_file}}"\n'
        "[runtimes.inline]\n"
        'command = "bash -c \'cat \\"$1\\"\' _ {{prompt_file}}"\n'
        "[runtimes.abs]\n"
        'command = "env ./bin/agent {{prompt_file}}"\n'
    )
    cfg = config_mod.load(wd.config)
    missing = doctor.runtime(cfg, "mine", wd.root)
    assert missing.verdict is Verdict.FAIL
    assert "`scripts/run-agent.sh` does not exist" in missing.message
    assert doctor.runtime(cfg, "inline", wd.root).verdict is Verdict.OK  # -c: code, no file
    assert "`./bin/agent` does not exist" in doctor.runtime(cfg, "abs", wd.root).message
    (wd.root / "scripts").mkdir()
    (wd.root / "scripts" / "run-agent.sh").write_text("#!/bin/sh\n")
    assert doctor.runtime(cfg, "mine", wd.root).verdict is Verdict.OK
    assert doctor.runtime(cfg, "shell", wd.root).verdict is Verdict.OK  # bash {{prompt_file}}
    report = jsonio.loads(_looop(wd, "doctor", "--offline", "--json").stdout)
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["runtime abs"]["verdict"] == "fail"
    assert by_name["runtime mine"]["verdict"] == "ok"


# -- serve's hint ----------------------------------------------------------------------------


def test_the_web_extra_hint_names_the_install_this_looop_came_from() -> None:
    checkout = '{"dir_info": {"editable": true}, "url": "file:///home/me/looop%20py"}'
    assert hint_for(checkout, "web") == "cd '/home/me/looop py' && pip install -e '.[web]'"
    built = '{"dir_info": {}, "url": "file:///src/looop"}'
    assert hint_for(built, "web") == "cd /src/looop && pip install '.[web]'"
    assert hint_for(None, "web") == "pip install 'looop-py[web]'"
    wheel = '{"archive_info": {}, "url": "https://example.com/looop_py.whl"}'
    assert hint_for(wheel, "web") == "pip install 'looop-py[web]'"
    assert hint_for("not json", "web") == "pip install 'looop-py[web]'"
    root = Path(__file__).resolve().parents[2]
    assert install_hint("web") == f"cd {root} && pip install -e '.[web]'"  # this checkout


def test_serve_without_the_web_extra_says_how_to_add_it(wd: Paths, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "starlette"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ImportError('No module named starlette', name='starlette')\n"
    )
    r = run_looop("-C", str(wd.root), "serve", "--json", env={"PYTHONPATH": str(shadow.parent)})
    assert r.returncode == 2, r.stderr
    error = jsonio.loads(r.stdout)
    assert "the web extra is not installed (starlette)" in error["error"]
    assert error["hint"] == install_hint("web") and "'.[web]'" in error["hint"]
