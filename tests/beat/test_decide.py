"""DECIDE and ACT through real beats: rules, limits, durability, archives, crash reports."""

from __future__ import annotations

import time
from typing import Any

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.beat.pulse import beat, load_committed
from looop_py.deciders.base import DecideRequest, Decision, InvalidReply, Usage
from looop_py.spend import ledger
from looop_py.workdir import journal
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workers import records
from tests.conftest import invoke_looop, open_wd, wait_for, write_sensor


class Seq:
    """Answers with the given moves in turn, recording each request."""

    name = "seq"

    def __init__(self, *values: Any, usage: Usage | None = None) -> None:
        self.values = list(values)
        self.calls: list[DecideRequest] = []
        self.usage = usage

    def decide(self, request: DecideRequest) -> Decision:
        self.calls.append(request)
        value = self.values.pop(0) if self.values else {"action": "noop"}
        return Decision(move=value, raw=jsonio.dumps(value).decode(), usage=self.usage)


def rules(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "rules"\n')


def test_rules_asks_once_when_a_sensor_breaks(wd: Paths) -> None:
    rules(wd)
    flag = wd.root / "ok"
    flag.write_text("1")
    write_sensor(wd, "probe", f"[ -s {flag} ] && echo fine || {{ echo dead >&2; exit 3; }}")
    beat(open_wd(wd))  # baseline: healthy
    flag.write_text("")
    first = beat(open_wd(wd))
    assert first.move["action"] == "ask_human"
    (ask,) = mailbox.pending(open_wd(wd))
    assert "sensors/probe.sh" in ask.prompt and "dead" in ask.prompt
    # The new ask changes sys-asks once; after that the broken sensor is old news.
    second = beat(open_wd(wd))
    assert second.outcome == "decided" and second.move["action"] == "noop"
    assert beat(open_wd(wd)).outcome == "skipped"
    assert len(mailbox.pending(open_wd(wd))) == 1


def test_rules_start_the_goal_whose_sensor_changed(wd: Paths) -> None:
    rules(wd)
    flag = wd.root / "v"
    flag.write_text("a")
    write_sensor(wd, "ci", f"cat {flag}")
    write_sensor(wd, "other", "echo same")
    (wd.goals / "fix-ci.md").write_text(
        "---\non: [ci]\nruntime: shell\nwork: echo fix\n---\nFix CI\n"
    )
    (wd.goals / "docs.md").write_text("---\non: [other]\n---\nDocs\n")
    (wd.goals / "welcome.md").unlink()
    first = beat(open_wd(wd))  # both triggered on the first beat: least recently acted first
    assert first.move["action"] == "start_worker"
    assert first.move.get("next_interval_s") == 5
    started = {first.move["id"]}
    second = beat(open_wd(wd, clock=lambda: time.time() + 6))  # the follow-up wakes the rest
    assert second.move["action"] == "start_worker"
    started.add(second.move["id"])
    assert started == {"docs", "fix-ci"}
    # A goal whose worker still runs waits its turn; let the first fix-ci worker end.
    wait_for(
        lambda: not records.get(open_wd(wd), "fix-ci", time.time()).alive, what="fix-ci to end"
    )
    flag.write_text("b")
    third = beat(open_wd(wd, clock=lambda: time.time() + 12))
    assert third.move == {
        "action": "start_worker",
        "id": "fix-ci",
        "prompt": "echo fix",
        "runtime": "shell",
        "journal": third.move["journal"],
    }


def test_rules_start_a_round_for_a_loop_goal(wd: Paths) -> None:
    rules(wd)
    write_sensor(wd, "ci", "echo red")
    (wd.goals / "sweep.md").write_text("---\non: [ci]\nlevel: L2-assisted\n---\nSweep\n")
    (wd.goals / "welcome.md").unlink()
    broken = beat(open_wd(wd))  # a loop without an intent cannot start: a clear, journaled failure
    assert broken.outcome == "failed" and "no intent" in (broken.reason or "")
    (wd.goals / "sweep.md").write_text(
        "---\non: [ci]\nintent: keep ci green\nlevel: L2-assisted\nmaker: echo hi\n---\nSweep\n"
    )
    write_sensor(wd, "ci", "echo redder")
    started = beat(open_wd(wd, clock=lambda: time.time() + 61))  # past the failure backoff
    assert started.move["action"] == "start_round", started.reason
    assert "round sweep-" in (started.journal or "")


def test_next_interval_is_durable_across_processes(wd: Paths) -> None:
    t0 = time.time()
    beat(open_wd(wd, clock=lambda: t0), decider=Seq({"action": "noop", "next_interval_s": 30}))
    assert load_committed(wd).next_wake == t0 + 30
    d = Seq()
    assert beat(open_wd(wd, clock=lambda: t0 + 10), decider=d).outcome == "skipped"
    woke = beat(open_wd(wd, clock=lambda: t0 + 31), decider=d)
    assert woke.outcome == "decided" and woke.forced_by == "next-interval"
    assert "forced: next-interval" in d.calls[0].prompt
    assert beat(open_wd(wd, clock=lambda: t0 + 40), decider=d).outcome == "skipped"


def test_noop_is_revisited_after_its_ttl(wd: Paths) -> None:
    t0 = time.time()
    beat(open_wd(wd, clock=lambda: t0), decider=Seq())
    assert beat(open_wd(wd, clock=lambda: t0 + 3600), decider=Seq()).outcome == "skipped"
    late = beat(open_wd(wd, clock=lambda: t0 + 6 * 3600 + 1), decider=Seq())
    assert late.outcome == "decided" and late.forced_by == "noop-ttl"


def test_every_decide_is_archived_and_old_runs_pruned(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "noop"\n[limits]\nruns_keep = 3\n')
    for i in range(5):
        beat(open_wd(wd), decider=Seq({"action": "noop", "reason": str(i)}), force=True)
    runs = sorted(p for p in wd.runs.iterdir())
    assert len(runs) == 3
    last = runs[-1]
    assert "=== NOW ===" in (last / "prompt.md").read_text()
    assert jsonio.read_json(last / "move.json") == {"action": "noop", "reason": "4"}
    assert '"reason"' in (last / "output.txt").read_text()


def test_interrupted_move_is_reported_not_rerun(wd: Paths, tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    record = {"move": {"action": "run_shell", "cmd": f"touch {marker}"}, "started_at": 1.0}
    jsonio.write_json(wd.state / "wal.json", record)
    d = Seq()
    result = beat(open_wd(wd), decider=d)
    assert not marker.exists()
    assert "interrupted: a run_shell move" in wd.journal.read_text()
    assert "LAST FAILURE" in d.calls[0].prompt and "interrupted" in d.calls[0].prompt
    assert not (wd.state / "wal.json").exists()
    assert result.outcome == "decided"
    events = [e["event"] for e in journal.recent_events(wd)]
    assert "move_interrupted" in events


def test_run_shell_output_is_shown_to_the_next_decide_once(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "noop"\n[gates]\nshell_allow = ["echo *"]\n')
    beat(open_wd(wd), decider=Seq({"action": "run_shell", "cmd": "echo hello-from-shell"}))
    d = Seq()
    beat(open_wd(wd), decider=d, force=True)
    beat(open_wd(wd), decider=d, force=True)
    assert "RUN_SHELL OUTPUT" in d.calls[0].prompt
    assert "$ echo hello-from-shell\nexit 0\nhello-from-shell" in d.calls[0].prompt
    assert "RUN_SHELL OUTPUT" not in d.calls[1].prompt


def test_limits_hold_the_decider_and_show_in_why(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "noop"\n[limits]\ndecides_per_hour = 2\n')
    d = Seq()
    beat(open_wd(wd), decider=d, force=True)
    beat(open_wd(wd), decider=d, force=True)
    held = beat(open_wd(wd), decider=d, force=True)
    assert held.outcome == "held" and "decide cap" in (held.reason or "") and len(d.calls) == 2
    why = invoke_looop("-C", str(wd.root), "why").stdout
    assert "decide cap" in why


def test_tokens_and_cost_reach_events(wd: Paths) -> None:
    beat(open_wd(wd), decider=Seq(usage=Usage(120, 30, 0.002)))
    (b,) = [e for e in journal.recent_events(wd) if e.get("outcome") == "decided"]
    assert b["decide"]["input_tokens"] == 120 and b["decide"]["cost_usd"] == 0.002
    assert b["decide"]["ms"] >= 0 and b["decide"]["backend"] == "seq"


def test_a_new_ask_wakes_the_loop_once(wd: Paths) -> None:
    d = Seq()
    beat(open_wd(wd), decider=d)
    mailbox.open_ask(open_wd(wd), prompt="help", asker="w1", now=time.time())
    woke = beat(open_wd(wd), decider=d)
    assert woke.outcome == "decided"
    assert any(c.item == "snap:sys-asks" for c in woke.changed)
    assert "PENDING ASKS" in d.calls[-1].prompt and "help" in d.calls[-1].prompt
    assert beat(open_wd(wd), decider=d).outcome == "skipped"


def test_write_moves_change_files_atomically_and_keep_history(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "noop"\n[gates]\nallow_sensors = ["s1"]\n')
    moves = [
        {"action": "write_goal", "id": "g1", "body": "# G1"},
        {"action": "write_sensor", "name": "s1", "script": "echo 1"},
        {"action": "write_playbook", "body": "new policy"},
        {"action": "write_playbook", "body": "newer policy"},
        {"action": "archive_goal", "id": "g1"},
        {"action": "write_schedule", "name": "standup", "every_s": 3600},
        {"action": "drop_schedule", "name": "standup"},
    ]
    t = time.time()
    for i, m in enumerate(moves):
        r = beat(open_wd(wd, clock=lambda i=i: t + i), decider=Seq(m), force=True)
        assert r.outcome == "decided", r.reason
    assert (
        not (wd.goals / "g1.md").exists() and (wd.goals_archive / "g1.md").read_text() == "# G1\n"
    )
    assert (wd.sensors / "s1.sh").read_text().startswith("#!/usr/bin/env bash")
    assert wd.playbook.read_text() == "newer policy\n"
    assert len(list(wd.playbook_history.glob("*.md"))) == 2
    acted = jsonio.read_json(wd.goal_activity)["goals"]
    assert "g1" in acted


class Prose:
    """Answers every decide with prose the provider billed: an InvalidReply with its usage."""

    name = "prose"

    def __init__(self, usage: Usage | None) -> None:
        self.usage = usage
        self.calls = 0

    def decide(self, request: DecideRequest) -> Decision:
        self.calls += 1
        error = InvalidReply("the decider returned prose; expected one JSON object")
        error.usage, error.raw = self.usage, "I would wait and see."
        raise error


NOON = time.mktime((2026, 11, 25, 12, 0, 0, 0, 0, -1))


def after_backoff(wd: Paths, beats: int) -> WorkDir:
    """The work dir `beats` half hours after noon: any backoff so far has run out."""
    return open_wd(wd, clock=lambda: NOON + 1800 * beats)


def test_an_invalid_reply_is_charged_and_a_daily_budget_stops_it(wd: Paths) -> None:
    """Before: an invalid reply returned before the ledger, so $0 was charged and the model
    was called again every backoff all day. Now it is charged first, and the budget holds."""
    wd.config.write_text("[limits]\ndaily_usd = 0.01\n")
    d = Prose(Usage(1000, 100, 0.006, 800))
    first = beat(after_backoff(wd, 0), decider=d, force=True)
    assert first.outcome == "failed" and "prose" in (first.reason or "")
    spend = ledger.load(open_wd(wd))
    assert (spend.tokens, spend.usd, spend.cache_read_tokens) == (1100, 0.006, 800)
    assert spend.by_source["decider"]["charges"] == 1
    beat(after_backoff(wd, 1), decider=d, force=True)
    held = beat(after_backoff(wd, 2), decider=d, force=True)
    assert held.outcome == "held" and "daily USD budget spent: $0.0120" in (held.reason or "")
    assert d.calls == 2  # overspent by one call, never more


def test_an_invalid_reply_without_usage_counts_as_unmetered(wd: Paths) -> None:
    wd.config.write_text("[limits]\ndaily_tokens = 100000\n")
    d = Prose(None)
    for n in range(3):
        beat(after_backoff(wd, n), decider=d, force=True)
    held = beat(after_backoff(wd, 3), decider=d, force=True)
    assert held.outcome == "held" and "fails closed" in (held.reason or "") and d.calls == 3
