"""The moves done without loading the gate (act.UNGATED): only what runs nothing at all.

A full beat whose decider answers noop does not import the gate (the shell parser, the loop
spec, the runtimes, the mailbox); every other move still passes it. The hostile questions
first: does a move that could run something slip past the gate, and is an ungated move one
the gate would admit unasked, reading no file, under the strictest gates?
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looop_py.moves import act, gate, union
from looop_py.moves.gate import Power
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd
from tests.freshbeat import after_full_beat

STRICT = "[gates]\nshell_allow = []\nallow_runtimes = []\nallow_sensors = []\n"
HEAVY = (
    "looop_py.moves.gate",
    "looop_py.moves.shellgate",
    "looop_py.moves.shparse",
    "looop_py.asks.mailbox",
    "looop_py.workers.runtimes",
    "difflib",
    "looop_py.workdir.provenance",
    "looop_py.engine.spec",
)


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(root.rglob("*"))
    }


def test_a_move_that_can_run_something_still_passes_the_gate(wd: Paths) -> None:
    wd.config.write_text(wd.config.read_text() + STRICT)
    w = open_wd(wd)
    for move in (
        {"action": "run_shell", "cmd": "touch PWNED", "reason": "x"},
        {"action": "write_sensor", "name": "evil", "script": "touch PWNED"},
    ):
        parsed = union.parse(move)
        assert not isinstance(parsed.action, act.UNGATED)
        outcome = act.execute(w, parsed, 1000.0)
        assert outcome.held is not None, outcome  # an approval ask, not a run
    assert not (wd.root / "PWNED").exists()
    assert not (wd.sensors / "evil.sh").exists()
    refused = act.execute(w, union.parse({"action": "run_shell", "cmd": "rm -rf /"}), 1000.0)
    assert not refused.ok and "tripwire" in refused.note


@pytest.mark.parametrize("cls", act.UNGATED)
def test_an_ungated_move_is_one_the_gate_admits_unasked_and_it_touches_nothing(
    wd: Paths, cls: type
) -> None:
    name = next(n for n, c in union.ACTIONS.items() if c is cls)
    assert gate.TABLE[name].power is Power.NOTHING and gate.TABLE[name].unasked == "always"
    wd.config.write_text(wd.config.read_text() + STRICT)
    w = open_wd(wd)
    move = union.parse({"action": name, "reason": "$(touch PWNED)"})
    assert gate.current_file(w, move) == (None, None)  # the gate reads no file for it
    admission = gate.admit(w, move, 1000.0)
    assert admission.run and admission.held is None and admission.verdict.refused is None
    before = _tree(wd.root)
    assert act.execute(w, move, 1000.0) == act.Outcome(True)
    assert _tree(wd.root) == before  # no ask, no journal line, no fence, no file
    assert not (wd.root / "PWNED").exists()


def _full_beat_modules(wd: Paths) -> list[str]:
    """The modules of HEAVY a fresh interpreter holds after one full beat (`pulse --force`)."""
    found: list[str] = after_full_beat(wd.root, f"[m for m in {HEAVY!r} if m in sys.modules]")
    return found


def _last_beat(wd: Paths) -> dict[str, object]:
    events = [json.loads(line) for line in wd.events.read_text().splitlines()]
    return next(e for e in reversed(events) if e["event"] == "beat")


def test_a_noop_full_beat_loads_no_gate_and_a_run_shell_beat_does(wd: Paths) -> None:
    for starter in wd.goals.glob("*.md"):  # fenced: the loop index reads them with the spec
        starter.unlink()
    (wd.goals / "alpha.md").write_text("# Alpha\n\nkeep it up\n")
    assert _full_beat_modules(wd) == []  # the noop decider
    assert _last_beat(wd)["outcome"] == "decided"
    wd.config.write_text('[decider]\nbackend = "rules"\n')  # the default: nothing to start
    assert _full_beat_modules(wd) == []
    assert _last_beat(wd)["move"]["action"] == "noop"  # type: ignore[index]
    script = wd.root / "moves.jsonl"
    script.write_text(
        json.dumps({"action": "noop", "reason": "nothing to do"})
        + "\n"
        + json.dumps({"action": "run_shell", "cmd": "touch PWNED", "reason": "x"})
        + "\n"
    )
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.jsonl"\n')
    assert _full_beat_modules(wd) == []  # the script decider answers noop
    beat = _last_beat(wd)
    assert beat["outcome"] == "decided" and beat["move"] == {
        "action": "noop",
        "reason": "nothing to do",
    }
    loaded = _full_beat_modules(wd)  # then run_shell: the gate holds it
    assert "looop_py.moves.gate" in loaded and "looop_py.moves.shellgate" in loaded, loaded
    assert _last_beat(wd)["move"]["action"] == "run_shell"  # type: ignore[index]
    assert not (wd.root / "PWNED").exists()
