"""The aider runtime against the real aider, talking only to the fake model server.

aider runs no shell commands unattended, so it cannot call `looop done`: its last message
ends with a STATUS line, and looop reads that and the usage from the files aider writes
into the session dir. It must leave the work dir alone but for the edits it was asked
for: no .git, no .gitignore edit, no .aider* files, and no attempt to reach the network
(the fake server, set as the proxy for every other host, records any).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from looop_py.workdir.paths import Paths
from looop_py.workers import aider, records
from tests.agentclis import AIDER_INFO, env_for, runtime_toml
from tests.agents.test_runtimes import run_worker
from tests.conftest import run_looop
from tests.fakemodel import FakeModel, Turn

pytestmark = [pytest.mark.agents, pytest.mark.slow, pytest.mark.timeout(240)]

STATUS = "STATUS: done: the fake model did it"


def whole(name: str, text: str) -> str:
    """A file edit in aider's `whole` format (the one it uses for an unknown model)."""
    return f"{name}\n```\n{text}```\n"


def offline(mp: pytest.MonkeyPatch, model: FakeModel) -> None:
    """Every host but 127.0.0.1 goes through the fake server, which records and refuses it."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY"):
        mp.setenv(name, model.base)


def workdir(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("original\n")
    (ws / ".gitignore").write_text("*.tmp\n")
    return ws


def snapshot(ws: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p.relative_to(ws)), p.read_bytes()) for p in ws.rglob("*") if p.is_file())


def test_an_aider_worker_edits_reports_its_status_and_usage_and_leaves_nothing_else(
    wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = workdir(tmp_path)
    reply = "I wrote the notes.\n\n" + whole("notes.txt", "written by aider\n") + "\n" + STATUS
    with FakeModel(script=[Turn(text=reply)], sequential=True) as model:
        offline(monkeypatch, model)
        status, result = run_worker(wd, "aider", model, tmp_path / "home", monkeypatch, cwd=ws)
    assert (result["status"], result["summary"], result["source"]) == (
        "done",
        "the fake model did it",
        "envelope",
    )
    usage = result["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (model.input_tokens, 30)
    assert model.input_tokens == 120
    price = 120 * AIDER_INFO["input_cost_per_token"] + 30 * AIDER_INFO["output_cost_per_token"]
    assert usage["cost_usd"] == pytest.approx(price)
    assert status["usage"] == usage
    # It did the edit, and nothing else: no repo, no .gitignore line, no .aider* file.
    assert (ws / "notes.txt").read_text() == "written by aider\n"
    assert sorted(p.name for p in ws.iterdir()) == [".gitignore", "keep.txt", "notes.txt"]
    assert (ws / ".gitignore").read_text() == "*.tmp\n"
    assert model.proxied == []  # no update check, price list, analytics or release notes
    d = wd.sessions / "w1"
    assert (d / aider.EVENTS).exists() and (d / aider.CHAT).exists()
    # The contract it was given asks for the STATUS line, not for commands it cannot run.
    prompt = model.posts[0].body["messages"][-1]["content"]
    assert "STATUS: done|done-with-concerns|blocked" in prompt
    assert '"$LOOOP_BIN" done' not in prompt


def test_l1_runs_aider_in_a_throwaway_copy_and_still_records_its_result(
    wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = workdir(tmp_path)
    before = snapshot(ws)
    reply = whole("keep.txt", "changed\n") + whole("new.txt", "new\n") + STATUS
    with FakeModel(script=[Turn(text=reply)], sequential=True) as model:
        offline(monkeypatch, model)
        _, result = run_worker(
            wd, "aider", model, tmp_path / "home", monkeypatch, cwd=ws, read_only=True
        )
    chat = (wd.sessions / "w1" / aider.CHAT).read_text()
    assert "Applied edit to keep.txt" in chat and "Applied edit to new.txt" in chat  # in the copy
    assert snapshot(ws) == before
    assert result["status"] == "done" and result["summary"] == "the fake model did it"
    assert "throwaway copy" in result["read_only"]
    meta = records.read_record(wd.sessions / "w1" / records.META)
    assert meta["read_only"] == "copy" and not Path(meta["copy"]).exists()


def test_a_provider_failing_every_request_costs_3_requests_and_seconds_not_a_minute(
    wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At aider's defaults a persistent 5xx cost 27 requests over ~64 s (its own loop's 9
    tries, doubling to 60 s, each retried twice by openai's client). looop stops aider at
    its first "Retrying in" line: its client's 3 requests, then blocked in aider's words."""
    with FakeModel(script=[Turn(status=500)] * 100, sequential=True) as model:
        offline(monkeypatch, model)
        started = time.monotonic()
        exit_, result = run_worker(
            wd, "aider", model, tmp_path / "home", monkeypatch, wait_s=120, exit_ok=False
        )
        took = time.monotonic() - started
    assert len(model.posts) == 3, len(model.posts)
    assert took <= 30, took
    assert result["status"] == "blocked", result
    says = "internal error in the fake model server The API provider's servers are down"
    assert says in result["summary"]
    assert "usage" not in result  # no reply, no tokens
    assert "looop stopped aider's own retries" in exit_["stopped"]
    listed = run_looop("-C", str(wd.root), "workers", "--all", "--json")
    assert says in listed.stdout


def test_a_reply_that_says_aider_s_retry_line_does_not_stop_the_worker(
    wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's own words are in the same output: a reply quoting aider's retry line,
    word for word, is a reply, not a retry."""
    quoted = "litellm.InternalServerError: quoted\nRetrying in 0.2 seconds...\n"
    reply = quoted + "> Retrying in 0.5 seconds...\n" + STATUS
    with FakeModel(script=[Turn(text=reply)], sequential=True) as model:
        offline(monkeypatch, model)
        exit_, result = run_worker(wd, "aider", model, tmp_path / "home", monkeypatch)
    assert "stopped" not in exit_, exit_
    assert (result["status"], result["summary"]) == ("done", "the fake model did it")


def test_a_bad_key_is_one_request_and_aider_s_plain_reason(
    wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeModel(script=[Turn(status=401)] * 10, sequential=True) as model:
        offline(monkeypatch, model)
        started = time.monotonic()
        exit_, result = run_worker(wd, "aider", model, tmp_path / "home", monkeypatch)
        took = time.monotonic() - started
    assert exit_["exit_code"] == 0  # aider exits 0 whatever happened
    assert "stopped" not in exit_  # aider retries no 401: nothing for looop to stop
    assert len(model.posts) == 1
    assert took <= 20, took
    assert result["status"] == "blocked", result
    assert (
        "The API provider is not able to authenticate you. Check your API key."
        in (result["summary"])
    )


def test_a_429_s_retry_after_is_waited_out_and_the_worker_goes_on(
    wd: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """openai's client waits out a 429's Retry-After within aider's first try, so aider
    prints no retry line and looop does not stop it."""
    limited = Turn(status=429, retry_after="2")
    with FakeModel(script=[Turn(text=STATUS)] * 2, fail_first=[limited], sequential=True) as model:
        offline(monkeypatch, model)
        exit_, result = run_worker(wd, "aider", model, tmp_path / "home", monkeypatch)
    assert len(model.posts) == 2, len(model.posts)
    assert model.posts[1].at - model.posts[0].at >= 2.0  # the server's word, not a guess
    assert "stopped" not in exit_
    assert (result["status"], result["summary"]) == ("done", "the fake model did it")


def test_looop_run_counts_the_tokens_aider_reported(wd: Paths, tmp_path: Path) -> None:
    (wd.goals / "welcome.md").unlink()
    wd.config.write_text(wd.config.read_text() + runtime_toml("aider"))
    (wd.goals / "triage.md").write_text(
        "---\nintent: a real-CLI loop\nlevel: L1\ncadence: daily 03:00\n"
        "runtime: aider\nmaker: Report what you found.\nchecker: Check the report.\n---\n"
    )
    with FakeModel(script=[Turn(text=STATUS)] * 2, sequential=True) as model:
        env = env_for("aider", model, tmp_path / "home")
        started = time.monotonic()
        r = run_looop("-C", str(wd.root), "run", "triage", "--json", env=env, timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["total_tokens"] == model.input_tokens + model.output_tokens == 300, (
        report,
        time.monotonic() - started,
    )


def test_a_round_whose_aider_maker_meets_a_failing_provider_ends_blocked_in_its_words(
    wd: Paths, tmp_path: Path
) -> None:
    (wd.goals / "welcome.md").unlink()
    wd.config.write_text(wd.config.read_text() + runtime_toml("aider"))
    (wd.goals / "triage.md").write_text(
        "---\nintent: a real-CLI loop\nlevel: L1\ncadence: daily 03:00\n"
        "runtime: aider\nmaker: Report what you found.\nchecker: Check the report.\n---\n"
    )
    with FakeModel(script=[Turn(status=503)] * 100, sequential=True) as model:
        env = env_for("aider", model, tmp_path / "home")
        started = time.monotonic()
        r = run_looop("-C", str(wd.root), "run", "triage", "--json", env=env, timeout=200)
        took = time.monotonic() - started
    report = json.loads(r.stdout)
    assert report["outcome"] == "blocked", report
    assert len(model.posts) == 3, len(model.posts)  # the maker's; no checker, no looop retry
    assert took <= 30, took
    assert "The API provider's servers are down or overloaded." in wd.journal.read_text()


def test_a_daily_budget_crossed_by_an_aider_maker_starts_no_checker(
    wd: Paths, tmp_path: Path
) -> None:
    """The budget is checked before every worker: the maker crossed it, so no checker ran
    (over by that one worker at most), and the ledger's dollars are aider's own cost."""
    from looop_py.spend import ledger
    from tests.conftest import open_wd

    (wd.goals / "welcome.md").unlink()
    toml = wd.config.read_text() + runtime_toml("aider") + "\n[limits]\ndaily_usd = 0.0005\n"
    wd.config.write_text(toml)
    (wd.goals / "triage.md").write_text(
        "---\nintent: a real-CLI loop\nlevel: L1\ncadence: daily 03:00\n"
        "runtime: aider\nmaker: Report what you found.\nchecker: Check the report.\n---\n"
    )
    with FakeModel(script=[Turn(text=STATUS)] * 2, sequential=True) as model:
        env = env_for("aider", model, tmp_path / "home")
        r = run_looop("-C", str(wd.root), "run", "triage", "--json", env=env, timeout=200)
    report = json.loads(r.stdout)
    assert report["outcome"] == "budget-exhausted", report
    assert len(model.posts) == 1  # the maker's one request; the checker never started
    spend = ledger.load(open_wd(wd))
    assert spend.tokens == model.input_tokens + model.output_tokens == 150
    per_token = (AIDER_INFO["input_cost_per_token"], AIDER_INFO["output_cost_per_token"])
    cost = model.input_tokens * per_token[0] + model.output_tokens * per_token[1]
    assert spend.usd == pytest.approx(cost, abs=1e-6) and spend.usd >= 0.0005
