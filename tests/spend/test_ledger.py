"""One ledger for all judgment: decides, loop rounds' workers and other workers, by source,
each charged once; no round starts while the daily budget is spent."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.beat import views
from looop_py.beat.pulse import beat
from looop_py.cli import render
from looop_py.loops import advance
from looop_py.loops import views as loop_views
from looop_py.loops.adapters import SessionWorkers
from looop_py.spend import ledger
from looop_py.workdir import config
from looop_py.workdir.paths import Paths
from looop_py.workers import reap, records
from tests.conftest import invoke_looop, open_wd, wait_for

NOW = 1_800_000_000.0
# A worker's CLI stream: 10 fresh prompt tokens, 400 read from the cache, 190 out, $0.01.
RESULT = {
    "type": "result",
    "subtype": "success",
    "result": "done",
    "total_cost_usd": 0.01,
    "usage": {
        "input_tokens": 10,
        "cache_read_input_tokens": 400,
        "cache_creation_input_tokens": 0,
        "output_tokens": 190,
    },
}


def test_a_key_is_charged_once_and_sources_stay_apart() -> None:
    s = ledger.Spend()
    c = ledger.Charge("worker:a.maker", "loop:a", 600, 0.01, 410, 400)
    s = ledger.charge(s, NOW, c)
    assert ledger.charge(s, NOW, c) is s  # the same key again: nothing changes (Spend has no eq)
    s = ledger.charge(s, NOW, ledger.Charge("decide:r1", "decider", 100, 0.002, 90, 0))
    s = ledger.charge(s, NOW, ledger.Charge("worker:w1", "workers", 50, None))
    assert (s.tokens, s.usd) == (750, 0.012)
    assert s.by_source["loop:a"]["tokens"] == 600 and s.by_source["decider"]["tokens"] == 100
    assert s.by_source["workers"] == {
        "tokens": 50,
        "usd": 0.0,
        "input_tokens": 0,
        "cache_read_tokens": 0,
        "charges": 1,
    }
    assert s.cache_hit_ratio() == pytest.approx(400 / 500)


def test_a_new_day_starts_at_zero_but_remembers_yesterdays_keys() -> None:
    c = ledger.Charge("worker:late", "workers", 500)
    s = ledger.charge(ledger.Spend(), NOW, c)
    tomorrow = ledger.charge(s, NOW + 86400, c)  # re-read after midnight: not charged again
    assert (tomorrow.tokens, tomorrow.day) == (0, ledger.local_day(NOW + 86400))
    assert ledger.today(tomorrow, NOW + 3 * 86400).charged == {}  # old keys are dropped


def test_spent_names_the_budget() -> None:
    s = ledger.charge(ledger.Spend(), NOW, ledger.Charge("k", "loop:a", 1000, 2.5))
    limits = config.LimitsConfig(daily_tokens=1000)
    assert ledger.spent(s, NOW, limits) == "daily token budget spent: 1000 of 1000"
    assert ledger.spent(s, NOW, config.LimitsConfig(daily_usd=2.0)) is not None
    assert ledger.spent(s, NOW + 86400, limits) is None


def test_worker_sources() -> None:
    assert reap.source_of({}) == "workers"
    assert reap.source_of({"round": None}) == "workers"
    assert reap.source_of({"round": "ci-fix-20261123T120000Z", "loop": "ci-fix"}) == "loop:ci-fix"


def _charge_many(root: str, start: int) -> None:
    paths = Paths(Path(root))
    for i in range(start, start + 40):
        ledger.record_charge(open_wd(paths), NOW, ledger.Charge(f"k{i}", "workers", 1))


def test_concurrent_chargers_lose_nothing(wd: Paths) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_charge_many, args=(str(wd.root), n * 40)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert ledger.load(open_wd(wd)).tokens == 160


def test_each_past_day_keeps_its_totals_by_source_for_a_month() -> None:
    day = 86400.0
    s = ledger.charge(ledger.Spend(), NOW, ledger.Charge("decide:r1", "decider", 100, 0.01))
    s = ledger.charge(s, NOW, ledger.Charge("worker:w1", "loop:tidy", 900, 0.09))
    s = ledger.charge(s, NOW + day, ledger.Charge("decide:r2", "decider", 5, None))
    first = ledger.local_day(NOW)
    assert s.day == ledger.local_day(NOW + day) and s.tokens == 5
    assert s.past == {
        first: {
            "tokens": 1000,
            "usd": 0.1,
            "by_source": {
                "decider": {"tokens": 100, "usd": 0.01},
                "loop:tidy": {"tokens": 900, "usd": 0.09},
            },
        }
    }
    later = ledger.today(s, NOW + 40 * day)  # over a month on: the old days are gone
    assert first not in later.past and ledger.local_day(NOW + day) not in later.past
    assert ledger.today(s, NOW + 2 * day).past.keys() == {first, ledger.local_day(NOW + day)}


# -- end to end: rounds until the budget is spent ---------------------------------------------


def _loop(wd: Paths, daily_tokens: int = 1000) -> None:
    line = json.dumps(RESULT)
    body = [f"echo '{line}'", '"$LOOOP_BIN" done --summary "ok"']
    lines = [
        "---",
        "intent: tidy",
        "level: L1-report",
        "cadence: every 1h",
        "runtime: shell",
        "maker: |",
        *[f"  {b}" for b in body],
        "checker: |",
        *[f"  {b}" for b in body],
        "---",
        "# tidy",
        "",
    ]
    (wd.goals / "welcome.md").unlink()
    (wd.goals / "tidy.md").write_text("\n".join(lines))
    wd.config.write_text(
        f'[decider]\nbackend = "noop"\n[limits]\ndaily_tokens = {daily_tokens}\n'
        '[runtimes.shell]\nusage = "claude"\n'
    )


def _rounds(wd: Paths) -> list[dict[str, object]]:
    found = [*wd.rounds.glob("*.json"), *(wd.rounds / "done").glob("*.json")]
    return [jsonio.read_json(p) for p in found]


def test_rounds_spend_the_daily_budget_then_the_next_due_round_is_held(wd: Paths) -> None:
    _loop(wd)
    base = time.mktime((*time.localtime()[:3], 10, 0, 0, 0, 0, -1))  # 10:00 today
    clock = [base]
    beat(open_wd(wd, clock=lambda: clock[0]))  # the book learns the cadence: due at 11:00
    clock[0] = base + 3601

    def round_done() -> bool:
        if any(r["phase"] == "done" for r in _rounds(wd)):
            return True
        beat(open_wd(wd, clock=lambda: clock[0]))
        clock[0] += 1
        return False

    wait_for(round_done, 60, lambda: f"a round to be done: {_rounds(wd)}", interval=0.05)
    [first] = _rounds(wd)
    assert first["outcome"] == "reported"

    spend = ledger.load(open_wd(wd))
    assert spend.by_source["loop:tidy"]["tokens"] == 1200  # maker and checker, 600 each
    assert spend.by_source["loop:tidy"]["usd"] == pytest.approx(0.02)
    assert spend.tokens >= 1000  # the budget is spent

    # Charged once, however often an ended worker is read again: a pulse killed before it
    # recorded the finalize, and a foreground `looop run` polling the same worker.
    for sid in (f"{first['id']}.maker", f"{first['id']}.checker"):
        status = records.read_record(wd.sessions / sid / records.STATUS)
        status.pop("finalized_at", None)
        jsonio.write_json(wd.sessions / sid / records.STATUS, status)
        SessionWorkers(open_wd(wd), lambda: clock[0]).poll(sid)
    reap.housekeeping(open_wd(wd), clock[0])
    assert ledger.load(open_wd(wd)).tokens == spend.tokens

    clock[0] = base + 3 * 3600 + 5  # the next slot (and then some) falls due
    for _ in range(3):
        beat(open_wd(wd, clock=lambda: clock[0]))
        clock[0] += 60
    assert len(_rounds(wd)) == 1  # no new round
    [row] = loop_views.overview(open_wd(wd), clock[0]).loops
    assert row.held == "budget"
    assert "held: budget" in render.loops_lines(loop_views.overview(open_wd(wd), clock[0]))[0]
    with pytest.raises(advance.BudgetHeld, match="daily token budget spent"):
        advance.start_round(open_wd(wd), "tidy", now=clock[0], trigger="move")
    if ledger.local_day(time.time()) == ledger.local_day(clock[0]):  # `looop run` reads the clock
        with pytest.raises(advance.BudgetHeld, match="loop tidy is held"):
            advance.run(open_wd(wd), "tidy")

    lim = views.limits_now(open_wd(wd), clock[0])
    assert lim.by_source["loop:tidy"] == {"tokens": 1200, "usd": pytest.approx(0.02)}
    assert lim.cache_hit_ratio == pytest.approx(800 / 820, abs=1e-4)
    assert lim.to_json()["by_source"]["loop:tidy"]["tokens"] == 1200
    text = "\n".join(render.limits_lines(lim))
    assert "loop:tidy 1200 tokens $0.0200" in text and "cache hits  98%" in text
    assert "daily token budget spent" in text  # the decider is held by the same ledger
    # `looop status` itself (the ledger's day is today: the fake clock started at 10:00 today)
    shown = json.loads(invoke_looop("-C", str(wd.root), "status", "--json").stdout)["limits"]
    assert shown["by_source"]["loop:tidy"]["tokens"] == 1200 and shown["tokens_today"] >= 1200
    assert "loop:tidy 1200 tokens" in invoke_looop("-C", str(wd.root), "status").stdout
    assert "held: budget" in invoke_looop("-C", str(wd.root), "loops").stdout

    # Once the budget is raised, the held loop starts at the next beat.
    wd.config.write_text(
        wd.config.read_text().replace("daily_tokens = 1000", "daily_tokens = 9000")
    )
    beat(open_wd(wd, clock=lambda: clock[0]))
    assert len(_rounds(wd)) == 2


def test_a_budget_crossed_mid_round_starts_no_checker(wd: Paths) -> None:
    """The budget is checked before every worker, not only at round start: a maker that
    crosses it is the one call over. Before: daily_tokens = 500 ended at 1200 (maker and
    checker); now at 600, and the round ends budget-exhausted, saying why."""
    _loop(wd, daily_tokens=500)
    base = time.mktime((*time.localtime()[:3], 10, 0, 0, 0, 0, -1))  # 10:00 today
    clock = [base]
    beat(open_wd(wd, clock=lambda: clock[0]))
    clock[0] = base + 3601

    def round_done() -> bool:
        if any(r["phase"] == "done" for r in _rounds(wd)):
            return True
        beat(open_wd(wd, clock=lambda: clock[0]))
        clock[0] += 1
        return False

    wait_for(round_done, 60, lambda: f"a round to be done: {_rounds(wd)}", interval=0.05)
    [done] = _rounds(wd)
    assert done["outcome"] == "budget-exhausted", done
    assert "checker not started: daily token budget spent: 600 of 500" in str(done["error"])
    assert not (wd.sessions / f"{done['id']}.checker").exists()
    assert ledger.load(open_wd(wd)).tokens == 600
    assert f"✗ round {done['id']} of tidy ended budget-exhausted: checker not started" in (
        wd.journal.read_text()
    )


def test_no_worker_starts_while_the_budget_is_spent(wd: Paths) -> None:
    from looop_py.errors import WorkerRefused
    from looop_py.workers import launch

    wd.config.write_text("[limits]\ndaily_usd = 0.01\n")
    ledger.record_charge(open_wd(wd), NOW, ledger.Charge("decide:r1", "decider", 10, 0.02))
    with pytest.raises(WorkerRefused, match=r"no worker starts: daily USD budget spent"):
        launch.start(open_wd(wd), "w1", "echo hi", runtime="shell", now=NOW)
    assert not (wd.sessions / "w1").exists()


def test_a_worker_a_decide_started_is_charged_to_workers(wd: Paths) -> None:
    from looop_py.workers import launch

    wd.config.write_text('[decider]\nbackend = "noop"\n[runtimes.shell]\nusage = "claude"\n')
    launch.start(open_wd(wd), "w1", f"echo '{json.dumps(RESULT)}'\n", runtime="shell", now=NOW)
    wait_for(
        lambda: (
            not records.get(open_wd(wd), "w1", time.time()).alive
            and records.read_record(wd.sessions / "w1" / records.STATUS).get("ended_at")
        ),
        30,
        "w1 to end",
        interval=0.05,
    )
    reap.housekeeping(open_wd(wd), NOW)
    reap.housekeeping(open_wd(wd), NOW + 1)  # finalized once; and a second look charges nothing
    spend = ledger.load(open_wd(wd))
    assert spend.by_source == {
        "workers": {
            "tokens": 600,
            "usd": 0.01,
            "input_tokens": 410,
            "cache_read_tokens": 400,
            "charges": 1,
        }
    }
