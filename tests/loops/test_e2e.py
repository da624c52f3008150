"""Loop rounds end to end through repeated beats, with shell-runtime makers and checkers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.beat.pulse import beat
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for, write_sensor

TRIGGER = "kick"


def loop_goal(wd: Paths, name: str, level: str, maker: str, checker: str, **extra: str) -> None:
    lines = [
        "---",
        f"intent: test loop {name}",
        f"level: {level}",
        "cadence: daily 03:00",
        "runtime: shell",
        f"on: [{TRIGGER}]",
    ]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    lines += ["maker: |", *[f"  {m}" for m in maker.splitlines()]]
    lines += ["checker: |", *[f"  {c}" for c in checker.splitlines()]]
    lines += ["---", f"# {name}", ""]
    (wd.goals / f"{name}.md").write_text("\n".join(lines))


def setup(wd: Paths, extra_config: str = "") -> Path:
    (wd.goals / "welcome.md").unlink()
    wd.config.write_text('[decider]\nbackend = "rules"\n' + extra_config)
    flag = wd.root / "kick-value"
    flag.write_text("0")
    write_sensor(wd, TRIGGER, f"cat {flag}")
    return flag


def rounds_of(wd: Paths) -> list[dict]:
    found = [*wd.rounds.glob("*.json"), *(wd.rounds / "done").glob("*.json")]
    return sorted((jsonio.read_json(p) for p in found), key=lambda r: r["started_at"])


def beat_until(wd: Paths, done: object, limit_s: float = 30.0) -> None:
    def beaten() -> bool:
        if done():  # type: ignore[operator]
            return True
        beat(open_wd(wd))
        return False

    wait_for(beaten, limit_s, lambda: f"the rounds to get there: {rounds_of(wd)}", interval=0.05)


def finished(wd: Paths, n: int = 1) -> object:
    return lambda: sum(1 for r in rounds_of(wd) if r["phase"] == "done") >= n


DONE = '"$LOOOP_BIN" done --summary'


def test_l1_round_reports_and_records_memory(wd: Paths) -> None:
    setup(wd)
    loop_goal(
        wd,
        "triage",
        "L1-report",
        f'echo looking; {DONE} "3 stale branches"',
        f'{DONE} "all 3 are real"',
    )
    first = beat(open_wd(wd))  # the trigger sensor appears: the rules decider starts the round
    assert first.move["action"] == "start_round"
    beat_until(wd, finished(wd))
    (r,) = rounds_of(wd)
    assert r["outcome"] == "reported" and r["maker"]["status"] == "done"
    assert r["checker"]["status"] == "done"
    assert "3 stale branches" in (r["maker"]["text"] or "")
    memory = (wd.memory / "triage.jsonl").read_text().splitlines()
    assert len(memory) == 1 and jsonio.loads(memory[0])["outcome"] == "reported"
    assert not list(wd.claims.glob("*.json"))  # the claim was released
    # The maker was told it is read-only, as comments of its script.
    prompt = (wd.sessions / f"{r['id']}.maker" / "prompt.md").read_text()
    assert "# READ-ONLY" in prompt


def test_l2_round_escalates_is_approved_and_proceeds(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "applied"
    setup(wd, f'[actions.apply-patch]\ncommand = "touch {marker}"\n')
    loop_goal(
        wd,
        "sweep",
        "L2-assisted",
        f'{DONE} "patched the flaky test"',
        f'{DONE} "green"',
        action="apply-patch",
    )
    beat_until(wd, lambda: any(r["phase"] == "awaiting-approval" for r in rounds_of(wd)))
    (ask,) = [a for a in mailbox.pending(open_wd(wd)) if a.kind == "approval"]
    assert "sweep" in ask.prompt and "apply-patch" in ask.prompt
    assert not marker.exists()
    r = invoke_looop("-C", str(wd.root), "approve", ask.id)
    assert r.returncode == 0, r.stderr
    assert marker.exists()
    (done,) = rounds_of(wd)
    assert done["phase"] == "done" and done["outcome"] == "proceeded"


def test_l2_denied_round_writes_the_refusal_to_memory(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "applied"
    setup(wd, f'[actions.apply-patch]\ncommand = "touch {marker}"\n')
    loop_goal(wd, "sweep", "L2", f'{DONE} "patch"', f'{DONE} "ok"', action="apply-patch")
    beat_until(wd, lambda: any(r["phase"] == "awaiting-approval" for r in rounds_of(wd)))
    (ask,) = [a for a in mailbox.pending(open_wd(wd)) if a.kind == "approval"]
    invoke_looop("-C", str(wd.root), "deny", ask.id, "--reason", "too risky on a Friday")
    assert not marker.exists()
    memory = (wd.memory / "sweep.jsonl").read_text()
    assert "too risky on a Friday" in memory


def test_l3_allowlisted_verified_round_proceeds_without_a_human(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "applied"
    setup(wd, f'[actions.apply-patch]\ncommand = "touch {marker}"\n')
    loop_goal(
        wd,
        "auto",
        "L3-unattended",
        f'{DONE} "patch"',
        f'{DONE} "verified"',
        action="apply-patch",
        allow="[apply-patch]",
    )
    beat_until(wd, finished(wd))
    (r,) = rounds_of(wd)
    assert r["outcome"] == "proceeded" and marker.exists()
    assert not [a for a in mailbox.pending(open_wd(wd)) if a.kind == "approval"]


def test_l3_unverified_work_escalates(wd: Paths, tmp_path: Path) -> None:
    setup(wd, f'[actions.apply-patch]\ncommand = "touch {tmp_path / "x"}"\n')
    loop_goal(
        wd,
        "auto",
        "L3",
        f'{DONE} "patch"',
        '"$LOOOP_BIN" done --status done-with-concerns --summary "flaky"',
        action="apply-patch",
        allow="[apply-patch]",
    )
    beat_until(wd, lambda: any(r["phase"] == "awaiting-approval" for r in rounds_of(wd)))
    assert not (tmp_path / "x").exists()


def test_maker_overspending_ends_budget_exhausted_and_skips_the_checker(wd: Paths) -> None:
    setup(wd)
    loop_goal(
        wd,
        "greedy",
        "L2",
        '"$LOOOP_BIN" done --tokens 5000 --summary "spent a lot"',
        f'{DONE} "never runs"',
        budget="{max_total_tokens: 1000}",
    )
    beat_until(wd, finished(wd))
    (r,) = rounds_of(wd)
    assert r["outcome"] == "budget-exhausted" and r["limit"] == "total-tokens"
    assert r["checker"] is None
    assert not (wd.sessions / f"{r['id']}.checker").exists()
    report = invoke_looop("-C", str(wd.root), "rounds", "--all", "--json")
    assert jsonio.loads(report.stdout)["rounds"][0]["outcome"] == "budget-exhausted"


@pytest.mark.slow
def test_two_rounds_on_one_target_never_run_at_once(wd: Paths) -> None:
    ledger = wd.root / "ledger"
    setup(wd)
    body = (
        f'echo "start $(date +%s.%N)" >> {ledger}; sleep 0.4; '
        f'echo "end $(date +%s.%N)" >> {ledger}; {DONE} "did it"'
    )
    loop_goal(wd, "one", "L1", body, f'{DONE} "ok"', target="shared")
    loop_goal(wd, "two", "L1", body, f'{DONE} "ok"', target="shared")
    beat_until(wd, finished(wd, 2), limit_s=60)
    events = [line.split() for line in ledger.read_text().splitlines()]
    assert [e[0] for e in events] == ["start", "end", "start", "end"]  # never interleaved
    assert float(events[2][1]) >= float(events[1][1])


def test_looop_loops_rounds_patterns_and_new(wd: Paths) -> None:
    only_shell = invoke_looop("-C", str(wd.root), "new", "daily-triage")
    assert only_shell.returncode == 2 and "default_runtime" in only_shell.stderr
    wd.config.write_text(
        wd.config.read_text() + "\n[runtimes.mine]\ncommand = 'x {{prompt_file}}'\n"
    )
    r = invoke_looop("-C", str(wd.root), "new", "daily-triage")
    assert "runtime: mine" in (wd.goals / "daily-triage.md").read_text()
    assert r.returncode == 0 and (wd.goals / "daily-triage.md").exists()
    again = invoke_looop("-C", str(wd.root), "new", "daily-triage")
    assert again.returncode == 2 and "already exists" in again.stderr
    listed = jsonio.loads(invoke_looop("-C", str(wd.root), "loops", "--json").stdout)
    (lp,) = listed["loops"]
    assert (lp["name"], lp["level"], lp["cadence"]) == ("daily-triage", "L1-report", "daily 09:00")
    pats = jsonio.loads(invoke_looop("patterns", "--json").stdout)["patterns"]
    assert len(pats) == 7 and pats[0]["name"] == "daily-triage"


def test_looop_run_drives_a_round_in_the_foreground(wd: Paths) -> None:
    setup(wd)
    loop_goal(wd, "triage", "L1", f'{DONE} "two things need you"', f'{DONE} "both real"')
    r = invoke_looop("-C", str(wd.root), "run", "triage")
    assert r.returncode == 0, r.stderr
    assert "[L1-report] loop `triage` (reported)" in r.stdout
    assert "two things need you" in r.stdout


def test_a_due_cadence_starts_a_round_without_a_decider(wd: Paths) -> None:
    setup(wd)
    wd.config.write_text('[decider]\nbackend = "noop"\n')
    loop_goal(wd, "often", "L1", f'{DONE} "tick"', f'{DONE} "ok"')
    text = (wd.goals / "often.md").read_text().replace("cadence: daily 03:00", "cadence: every 1m")
    (wd.goals / "often.md").write_text(text)
    t0 = time.time()
    beat(open_wd(wd, clock=lambda: t0))  # registers the loop; the first slot is a minute away
    assert rounds_of(wd) == []
    beat(open_wd(wd, clock=lambda: t0 + 61))
    (r,) = rounds_of(wd)
    assert r["trigger"] == "cadence"
    # A restart (a fresh process) does not fire it again in the same slot.
    beat(open_wd(wd, clock=lambda: t0 + 70))
    assert len(rounds_of(wd)) == 1


def test_a_blocked_maker_ends_the_round_blocked_unchecked_and_unasked(wd: Paths) -> None:
    """Before: a maker that failed on a 401 still got a checker, then an approval ask
    ("proposes … (NOT verified) … Approve?"), and the round's end reached no journal."""
    setup(wd)
    loop_goal(
        wd,
        "sweep",
        "L2-assisted",
        '"$LOOOP_BIN" done --status blocked --summary "401 invalid x-api-key"',
        f'{DONE} "checked"',
        action="report",
    )
    beat_until(wd, finished(wd))
    (r,) = rounds_of(wd)
    assert r["outcome"] == "blocked" and r["checker"] is None, r
    assert "maker blocked: 401 invalid x-api-key" in r["error"]
    assert not (wd.sessions / f"{r['id']}.checker").exists()
    assert not [a for a in mailbox.pending(open_wd(wd)) if a.kind == "approval"]
    journal = wd.journal.read_text()
    assert f"✗ round {r['id']} of sweep ended blocked: maker blocked: 401" in journal
    events = [json.loads(line) for line in wd.events.read_text().splitlines()]
    ends = [
        e
        for e in events
        if e.get("event") == "round_step" and e.get("round") == r["id"] and e.get("outcome")
    ]
    assert len(ends) == 1 and "401" in ends[0]["error"], events
    html = wd.root / "report.html"
    assert invoke_looop("-C", str(wd.root), "report", "--html", str(html)).returncode == 0
    assert f"round {r['id']} of sweep ended blocked: maker blocked: 401" in html.read_text()


class Starts:
    """Proposes start_round of `sweep` at every decide."""

    name = "starts"

    def decide(self, request: DecideRequest) -> Decision:
        return Decision({"action": "start_round", "loop": "sweep"})


def test_start_round_of_a_live_loop_is_a_clear_no_op(wd: Paths) -> None:
    """Before: it failed the beat and armed a 60 s backoff."""
    setup(wd)
    loop_goal(wd, "sweep", "L1-report", f'sleep 20; {DONE} "late"', f'{DONE} "ok"')
    first = beat(open_wd(wd), decider=Starts(), force=True)
    assert first.outcome == "decided", first
    (r,) = rounds_of(wd)
    again = beat(open_wd(wd), decider=Starts(), force=True)
    assert again.outcome == "decided", again
    assert f"already has a live round ({r['id']}" in wd.journal.read_text()
    assert "nothing started" in wd.journal.read_text()
    assert not (wd.state / "backoff.json").exists()
    assert len(rounds_of(wd)) == 1
    invoke_looop("-C", str(wd.root), "worker", "kill", f"{r['id']}.maker")
