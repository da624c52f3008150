"""What the CLI prints, from views built by hand: every beat outcome, in words and in JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.beat import pulse as beat_mod
from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.cli import render, summary
from looop_py.cli.output import Note, show
from looop_py.cli.pulse import pulse_command
from looop_py.sensing.sensors import Reading
from looop_py.workdir.config import Config
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths
from looop_py.world import Change
from tests.memshelf import MemoryShelf

OK = Reading("sensor-disk", {"signal": "ok", "detail": {}}, 0.004)
BROKEN = Reading("sensor-ci", {"signal": {"error": True, "exit_code": 3}, "detail": {}}, 0.002)
HASH = "xxh3:0123456789abcdef0123456789abcdef"

OUTCOMES: dict[str, BeatResult] = {
    "skipped": BeatResult(BeatOutcome.SKIPPED, world_hash=HASH, readings=(OK,), duration_s=0.012),
    "decided": BeatResult(
        BeatOutcome.DECIDED,
        world_hash=HASH,
        changed=(Change("snap:sensor-disk", '"low"', '"ok"'),),
        readings=(OK, BROKEN),
        move={"action": "noop", "reason": "fine"},
        duration_s=0.2,
    ),
    "failed": BeatResult(
        BeatOutcome.FAILED,
        readings=(OK,),
        reason="the decider timed out after 600 s",
        duration_s=0.3,
    ),
    "held": BeatResult(
        BeatOutcome.HELD,
        readings=(OK,),
        reason="backoff: 2 failed beats in a row, retry in 120 s",
        duration_s=0.02,
    ),
    "locked": BeatResult(BeatOutcome.LOCKED, reason="another pulse is running"),
}

HUMAN = {
    "skipped": "· skipped: world unchanged (xxh3:0123456789ab…), 1/1 sensors ok, 12 ms",
    "decided": '✓ nothing to do: fine (1 changed: sensor disk "low" → "ok";'
    " 1/2 sensors ok (failed: ci), 200 ms)",
    "failed": "✗ beat failed: the decider timed out after 600 s (1/1 sensors ok, 300 ms)",
    "held": "· held: backoff: 2 failed beats in a row, retry in 120 s (1/1 sensors ok, 20 ms)",
    "locked": "· locked: another pulse is running; this one stepped aside",
}


def test_every_outcome_has_a_case_here() -> None:
    assert set(OUTCOMES) == {o.value for o in BeatOutcome} == set(HUMAN)


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_every_beat_outcome_renders_in_words(outcome: str) -> None:
    assert summary.beat_line(OUTCOMES[outcome]) == HUMAN[outcome]


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_every_beat_outcome_renders_as_json(outcome: str) -> None:
    data = jsonio.loads(jsonio.dumps(OUTCOMES[outcome].to_json()))
    assert data["outcome"] == outcome
    assert set(data) >= {"outcome", "world_hash", "changed", "sensors", "reason", "move", "ms"}
    if outcome == "decided":
        assert data["sensors"]["ci"] == {"status": "failed", "ms": 2.0, "error": 3}
        assert data["changed"] == [{"item": "snap:sensor-disk", "old": '"low"', "new": '"ok"'}]
    if outcome in ("failed", "held"):
        assert data["reason"] == OUTCOMES[outcome].reason


def _door(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    outcome: str,
    *,
    tty: bool = False,
    **flags: bool,
) -> tuple[int, str, str]:
    monkeypatch.setattr(
        beat_mod, "beat", lambda paths, force=False, handover=None: OUTCOMES[outcome]
    )
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    opts = {"as_json": False, "force": False, "verbose": False, "quiet": False, **flags}
    nowhere = Paths(Path("/nonexistent"))  # the beat is replaced: nothing is read
    code = pulse_command(WorkDir(nowhere, Config(), MemoryShelf()), **opts)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("outcome", ["skipped", "locked", "held"])
def test_the_pulse_door_is_quiet_off_a_terminal_when_nothing_happened(
    outcome: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _door(monkeypatch, capsys, outcome) == (0, "", "")
    code, out, _ = _door(monkeypatch, capsys, outcome, tty=True)
    assert code == 0 and out == HUMAN[outcome] + "\n"
    code, out, _ = _door(monkeypatch, capsys, outcome, verbose=True)
    assert code == 0 and out == HUMAN[outcome] + "\n"


def test_the_pulse_door_speaks_when_the_beat_acted_or_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _door(monkeypatch, capsys, "decided") == (0, HUMAN["decided"] + "\n", "")
    assert _door(monkeypatch, capsys, "failed") == (1, "", HUMAN["failed"] + "\n")
    assert _door(monkeypatch, capsys, "decided", quiet=True) == (0, "", "")
    # -q prints nothing unless the beat failed
    assert _door(monkeypatch, capsys, "failed", quiet=True) == (1, "", HUMAN["failed"] + "\n")
    code, out, err = _door(monkeypatch, capsys, "decided", verbose=True)
    assert "sensor-ci" in err and "failed" in err and out == HUMAN["decided"] + "\n"
    code, out, _ = _door(monkeypatch, capsys, "held", as_json=True)
    assert code == 0 and jsonio.loads(out)["outcome"] == "held"


def test_notes_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    show(["to stdout", Note("to stderr")])
    out = capsys.readouterr()
    assert (out.out, out.err) == ("to stdout\n", "to stderr\n")
    assert render.journal_lines([]) == ["(the journal is empty: no move has been made yet)"]
    assert isinstance(render.journal_lines([])[0], Note)


def test_schedules_render_each_kind() -> None:
    probe = {
        "signal": {"a": "pending", "b": "due", "c": {"period": 2}, "d": "invalid"},
        "detail": {
            "a": {"kind": "once", "due_in_s": 300},
            "b": {"kind": "once", "due_in_s": -5},
            "c": {"kind": "every", "every_s": 3600.0, "next_due_in_s": 120},
            "d": {"error": "bad cron"},
        },
    }
    rows = render.schedules_json(probe)["schedules"]
    assert [r["name"] for r in rows] == ["a", "b", "c", "d"]
    assert rows[2] == {
        "name": "c",
        "signal": {"period": 2},
        "kind": "every",
        "every_s": 3600.0,
        "next_due_in_s": 120,
    }
    text = "\n".join(render.schedules_lines(probe))
    assert "a                        once   once                 next in 5m" in text
    assert "due now" in text and "every 1h" in text and "invalid: bad cron" in text
    assert render.schedules_lines({"signal": {}, "detail": {}}) == ["no schedules"]


def test_prune_renders_what_it_removed() -> None:
    from looop_py.beat.prune import Pruned

    result = Pruned(
        sessions_removed=["w1"],
        runs_removed=["20260101-000000.000000001-1"],
        rounds_archived=["loop-1"],
        events=[
            {"event": "session_pruned", "id": "w1"},
            {"event": "claim_reaped", "name": "repo", "reason": "holder dead"},
            {"event": "worker_ended", "id": "w2", "state": "exited"},
        ],
    )
    assert render.prune_lines(result) == [
        "removed session w1",
        "removed run 20260101-000000.000000001-1",
        "archived round loop-1 to rounds/done/",
        "reaped claim repo: holder dead",
        "settled worker w2: exited, exit ?",
    ]
    assert render.prune_lines(Pruned([], [], [], [])) == ["nothing to prune"]


def test_a_changed_item_names_an_absent_side_instead_of_printing_none() -> None:
    assert render.change_line(Change("playbook", None, "xxh3:1")) == "  + playbook appeared: xxh3:1"
    assert render.change_line(Change("goal:x", "xxh3:1", None)) == "  - goal:x gone (was xxh3:1)"
    assert render.change_line(Change("snap:s", '"a"', '"b"')) == '  ~ snap:s: "a" → "b"'


def test_a_decided_beat_names_its_target_what_changed_and_where_to_look() -> None:
    ended = Change(
        "snap:sys-sessions",
        '[{"exit_code":null,"health":"busy","id":"welcome","state":"running"}]',
        '[{"exit_code":0,"health":"dead","id":"welcome","state":"exited"}]',
    )
    goal = Change("goal:welcome", None, "xxh3:1")
    started = BeatResult(
        BeatOutcome.DECIDED,
        changed=(goal,),
        readings=(OK,),
        move={"action": "start_worker", "id": "welcome", "prompt": "…"},
        duration_s=0.05,
    )
    assert summary.beat_line(started) == (
        "✓ started worker welcome (1 changed: goal welcome appeared; 1/1 sensors ok, 50 ms)"
        " → follow: looop worker logs welcome -f"
    )
    noop = BeatResult(
        BeatOutcome.DECIDED, changed=(ended,), move={"action": "noop"}, duration_s=0.01
    )
    assert "1 changed: worker welcome exited 0" in summary.beat_line(noop)
    held = BeatResult(
        BeatOutcome.DECIDED,
        changed=(goal,),
        move={"action": "run_shell", "cmd": "make deploy"},
        decide={"held_as": "decider-3"},
    )
    line = summary.beat_line(held)
    assert line.startswith("✓ held run_shell for a human") and "looop approve decider-3" in line
    forced = BeatResult(BeatOutcome.DECIDED, move={"action": "noop"}, forced_by="force")
    assert "(forced;" in summary.beat_line(forced)


def test_many_changes_are_counted_not_listed() -> None:
    changed = tuple(Change(f"goal:g{i}", "xxh3:a", "xxh3:b") for i in range(7))
    clause = summary.changes_clause(changed)
    assert clause == "7 changed: goal g0 edited, goal g1 edited, goal g2 edited (+4 more)"
