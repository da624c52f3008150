"""Each worker runtime against its real CLI, the CLI talking only to the fake model server.

The fake model asks the CLI to run a shell command; the worker reports through
`"$LOOOP_BIN" done` and ends, and its result.json holds the usage the CLI reported.
In read-only mode (L1) the workspace is unchanged and a result is still recorded.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from looop_py.workdir import environ
from looop_py.workdir.paths import Paths
from looop_py.workers import launch, records
from tests.agentclis import env_for, runtime_toml
from tests.conftest import open_wd, run_looop, wait_for
from tests.fakemodel import FakeModel, Turn

pytestmark = [pytest.mark.agents, pytest.mark.slow, pytest.mark.timeout(180)]

RUNTIMES = ("claude", "codex", "pi")
ROOT = Path(__file__).resolve().parents[2]
DONE = '"$LOOOP_BIN" done --status done --summary "the fake model did it"'


def run_worker(
    wd: Paths,
    cli: str,
    model: FakeModel,
    home: Path,
    mp: pytest.MonkeyPatch,
    *,
    wait_s: float = 90,
    exit_ok: bool = True,
    **kw: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    for k, v in env_for(cli, model, home).items():
        mp.setenv(k, v)
    # The worker's LOOOP_BIN runs the code under test, whatever `looop` is installed.
    wrapper = home / "looop"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m looop_py "$@"\n')
    wrapper.chmod(0o755)
    mp.setattr(environ, "looop_bin", lambda: str(wrapper))
    wd.config.write_text(wd.config.read_text() + runtime_toml(cli))
    launch.start(open_wd(wd), "w1", "Do the task, then report.", runtime=cli, now=time.time(), **kw)
    d = wd.sessions / "w1"

    def ended() -> bool:
        return records.read_record(d / records.STATUS).get("state") in ("exited", "killed")

    try:
        wait_for(ended, timeout=wait_s, what=f"the {cli} worker to end")
    except BaseException:
        print((d / records.OUTPUT).read_text()[-3000:])
        raise
    # The supervisor writes result.json (usage and all) before the status that says it ended.
    wait_for((d / records.RESULT).exists, timeout=10, what="result.json")
    status = records.read_record(d / records.STATUS)
    result = records.read_record(d / records.RESULT)
    log = (d / records.OUTPUT).read_text()[-3000:]
    assert status.get("exit_code") == 0 or not exit_ok, log
    return status, result


@pytest.mark.parametrize("cli", RUNTIMES)
def test_a_worker_reports_through_looop_done_and_its_usage_is_in_result_json(
    cli: str, wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [Turn(shell=DONE), Turn(text="Reported.")]
    with FakeModel(script=script) as model:
        _, result = run_worker(wd, cli, model, tmp_path / "home", monkeypatch)
    assert result["status"] == "done"
    assert result["summary"] == "the fake model did it"
    assert result.get("source") != "envelope"
    usage = result["usage"]
    assert usage["input_tokens"] == model.input_tokens == 240
    assert usage["output_tokens"] == model.output_tokens == 60
    if cli in ("claude", "pi"):
        assert usage["cost_usd"] > 0


@pytest.mark.parametrize("cli", RUNTIMES)
def test_l1_leaves_the_workspace_unchanged_and_still_records_a_result(
    cli: str, wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("original\n")
    before = sorted((p.name, p.read_bytes()) for p in ws.iterdir())
    script = [
        Turn(shell="echo changed > keep.txt; echo new > new.txt"),
        Turn(shell=DONE),
        Turn(text="I could not write; read-only."),
    ]
    with FakeModel(script=script) as model:
        _, result = run_worker(
            wd, cli, model, tmp_path / "home", monkeypatch, cwd=ws, read_only=True
        )
    assert sorted((p.name, p.read_bytes()) for p in ws.iterdir()) == before
    # What `looop done` said went back to the model: a reason, never a traceback (exit 70).
    said = json.dumps([r.body for r in model.posts])
    assert "Traceback" not in said and "internal error" not in said
    if cli == "codex":  # its sandbox ran `looop done`, which said why it could not write
        assert "result.json: Read-only file system" in said
    assert result["status"] in ("done", "done-with-concerns", "blocked"), result
    assert result["summary"], result


@pytest.mark.parametrize("cli", RUNTIMES)
def test_looop_run_counts_the_tokens_the_cli_reported(cli: str, wd: Paths, tmp_path: Path) -> None:
    (wd.goals / "welcome.md").unlink()
    wd.config.write_text(wd.config.read_text() + runtime_toml(cli))
    (wd.goals / "triage.md").write_text(
        "---\nintent: a real-CLI loop\nlevel: L1\ncadence: daily 03:00\n"
        f"runtime: {cli}\nmaker: Report what you found.\nchecker: Check the report.\n---\n"
    )
    with FakeModel(script=[Turn(shell=DONE), Turn(text="Reported.")]) as model:
        env = env_for(cli, model, tmp_path / "home")
        r = run_looop("-C", str(wd.root), "run", "triage", "--json", env=env, timeout=150)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["total_tokens"] == model.input_tokens + model.output_tokens == 600  # 2 workers


@pytest.mark.parametrize("cli", ("claude", "codex", "pi"))
def test_a_daily_budget_crossed_by_the_maker_starts_no_checker(
    cli: str, wd: Paths, tmp_path: Path
) -> None:
    """The ledger's dollars are the server's own token sums priced (codex reports no cost:
    its built-in default-model price; claude and pi price them themselves), and the budget is
    checked before the checker starts. Before: codex was $0 forever, so `daily_usd = 0.001` never
    held, and the checker ran (600 tokens, $0)."""
    from looop_py.spend import ledger, prices

    (wd.goals / "welcome.md").unlink()
    toml = wd.config.read_text() + runtime_toml(cli) + "\n[limits]\ndaily_usd = 0.001\n"
    wd.config.write_text(toml)
    (wd.goals / "triage.md").write_text(
        "---\nintent: a real-CLI loop\nlevel: L1\ncadence: daily 03:00\n"
        f"runtime: {cli}\nmaker: Report what you found.\nchecker: Check the report.\n---\n"
    )
    with FakeModel(script=[Turn(shell=DONE), Turn(text="Reported.")]) as model:
        env = env_for(cli, model, tmp_path / "home")
        r = run_looop("-C", str(wd.root), "run", "triage", "--json", env=env, timeout=150)
    report = json.loads(r.stdout)
    assert report["outcome"] == "budget-exhausted", report
    assert "checker not started: daily USD budget spent" in r.stdout
    spend = ledger.load(open_wd(wd))
    assert spend.tokens == model.input_tokens + model.output_tokens == 300  # the maker only
    # claude prices a model it does not know ("claude-fake") at its Opus rate, pi at models.json's
    own = {"claude": prices.Price(5.0, 25.0), "pi": prices.Price(3.0, 15.0)}
    price = own.get(cli, prices.BUILTIN["codex"])
    expected = price.cost(model.input_tokens, model.output_tokens)
    assert spend.usd == pytest.approx(expected, abs=1e-6) and spend.usd >= 0.001
    assert spend.by_runtime[cli]["tokens"] == 300


@pytest.mark.parametrize("cli", ("codex", "pi"))
def test_a_worker_against_a_provider_failing_every_request_makes_3_requests(
    cli: str, wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """codex and pi read their retries only from their own config (30 and 12 requests at
    their defaults): codex gets `-c` flags on the worker's command line; pi an agent dir
    of looop's (state/pi-agent) linking the user's, and nothing in the workspace."""
    with FakeModel(script=[Turn(status=500)]) as model:
        status, _ = run_worker(wd, cli, model, tmp_path / "home", monkeypatch, exit_ok=False)
    assert len(model.posts) == 3, len(model.posts)
    assert all(post.body["model"] == "gpt-fake" for post in model.posts)  # the user's model
    if cli == "codex":
        assert status.get("exit_code") != 0, status  # pi exits 0 having printed its error
        command = records.read_record(wd.sessions / "w1" / records.META)["command"]
        assert "model_providers.fake.request_max_retries=0" in command
        return
    assert not (wd.root / ".pi").exists()  # the workspace: nothing of looop's to commit
    user = tmp_path / "home" / ".pi" / "agent"
    assert (wd.state / "pi-agent" / "models.json").resolve() == user / "models.json"
