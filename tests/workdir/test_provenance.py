"""A loop whose goal file a model last wrote without approval runs at most at L1."""

from __future__ import annotations

import time
from typing import Any

from looop_py.asks import mailbox
from looop_py.beat.pulse import beat
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.engine.levels import LoopLevel
from looop_py.loops import advance
from looop_py.loops.specs import load_loops, load_spec
from looop_py.moves import approvals
from looop_py.workdir import provenance
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd

L3 = (
    "---\nintent: tidy the docs\nlevel: L3-unattended\nallow: [report]\n"
    "maker: echo made\ncadence: every 1h\n---\n"
)


class Replay:
    name = "replay"

    def __init__(self, move: dict[str, Any]) -> None:
        self.move = move

    def decide(self, request: DecideRequest) -> Decision:
        return Decision(move=self.move, raw="")


def test_a_model_written_loop_runs_at_l1_until_a_human_edits_it(wd: Paths) -> None:
    path = wd.goals / "docs.md"
    path.write_text(L3)
    assert load_spec(open_wd(wd), "docs").level is LoopLevel.L3_UNATTENDED
    # The model changes only the notes (text, so it runs unasked) …
    r = beat(
        open_wd(wd), decider=Replay({"action": "write_goal", "id": "docs", "body": L3 + "Notes.\n"})
    )
    assert r.outcome == "decided" and path.read_text().endswith("Notes.\n")
    assert provenance.written_by_model(wd, "goals/docs.md", path.read_bytes())
    # … and from now on the loop runs at L1: its level came from a file a model wrote.
    assert load_spec(open_wd(wd), "docs").level is LoopLevel.L1_REPORT
    (spec,), _ = load_loops(open_wd(wd))
    assert spec.level is LoopLevel.L1_REPORT
    state = advance.start_round(open_wd(wd), "docs", now=time.time(), trigger="test")
    assert state.spec.level is LoopLevel.L1_REPORT
    # A human edit changes the file's hash: it is the human's again, at its own level.
    path.write_text(path.read_text() + "Reviewed by me.\n")
    assert load_spec(open_wd(wd), "docs").level is LoopLevel.L3_UNATTENDED


def test_a_loop_a_human_approved_keeps_its_level(wd: Paths) -> None:
    new = L3.replace("tidy the docs", "tidy the docs and the changelog")
    r = beat(open_wd(wd), decider=Replay({"action": "write_goal", "id": "docs", "body": new}))
    assert r.outcome == "decided" and not (wd.goals / "docs.md").exists()  # held: code
    (ask,) = mailbox.pending(open_wd(wd))
    approvals.approve(open_wd(wd), ask.id, now=time.time())
    assert (wd.goals / "docs.md").read_text() == new
    assert load_spec(open_wd(wd), "docs").level is LoopLevel.L3_UNATTENDED


def test_an_unreadable_ledger_fails_closed(wd: Paths) -> None:
    (wd.goals / "docs.md").write_text(L3)
    wd.provenance.write_text("{not json")
    assert load_spec(open_wd(wd), "docs").level is LoopLevel.L1_REPORT
