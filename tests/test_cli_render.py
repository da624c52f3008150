"""What the CLI prints, from views built by hand: every beat outcome, in words and in JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.beat import pulse as beat_mod
from looop_py.beat.pulse import BeatResult
from looop_py.beat.sensors import Reading
from looop_py.beat.worldhash import Change
from looop_py.cli import render
from looop_py.cli.output import Note, show
from looop_py.cli.pulse import pulse_command
from looop_py.workdir.paths import Paths

OK = Reading("sensor-disk", {"signal": "ok", "detail": {}}, 0.004)
BROKEN = Reading("sensor-ci", {"signal": {"error": True, "exit_code": 3}, "detail": {}}, 0.002)
HASH = "xxh3:0123456789abcdef0123456789abcdef"

OUTCOMES: dict[str, BeatResult] = {
    "skipped": BeatResult("skipped", world_hash=HASH, readings=(OK,), duration_s=0.012),
    "decided": BeatResult(
        "decided",
        world_hash=HASH,
        changed=(Change("snap:sensor-disk", '"low"', '"ok"'),),
        readings=(OK, BROKEN),
        move={"action": "noop", "reason": "fine"},
        duration_s=0.2,
    ),
    "failed": BeatResult(
        "failed", readings=(OK,), reason="the decider timed out after 600 s", duration_s=0.3
    ),
    "held": BeatResult(
        "held",
        readings=(OK,),
        reason="backoff: 2 failed beats in a row, retry in 120 s",
        duration_s=0.02,
    ),
    "locked": BeatResult("locked", reason="another pulse is running"),
}

HUMAN = {
    "skipped": "· skipped: world unchanged (xxh3:0123456789ab…), 1/1 sensors ok, 12 ms",
    "decided": "✓ decided noop: 1 item(s) changed, 1/2 sensors ok (failed: ci), 200 ms",
    "failed": "✗ beat failed: the decider timed out after 600 s (1/1 sensors ok, 300 ms)",
    "held": "· held: backoff: 2 failed beats in a row, retry in 120 s (1/1 sensors ok, 20 ms)",
    "locked": "· locked: another pulse is running; this one stepped aside",
}


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_every_beat_outcome_renders_in_words(outcome: str) -> None:
    assert render.beat_line(OUTCOMES[outcome]) == HUMAN[outcome]


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
    monkeypatch.setattr(beat_mod, "beat", lambda paths, force=False: OUTCOMES[outcome])
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    opts = {"as_json": False, "force": False, "verbose": False, "quiet": False, **flags}
    code = pulse_command(Paths(Path("/nonexistent")), **opts)
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
