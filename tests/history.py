"""History as the code writes it, dated in the past: a finished round archived in
rounds/done/ the way a beat archives one (shared by the tests of retention, of the seal's
history lines and of read-once)."""

from __future__ import annotations

from looop_py.engine.report import RoundOutcome
from looop_py.engine.rounds import Phase, RoundState
from looop_py.engine.spec import LoopSpec
from looop_py.loops import store
from looop_py.workdir.context import WorkDir


def archive_round(wd: WorkDir, rid: str, ended: float, *, loop: str = "sweep") -> str:
    """A round of `loop` that ended (reported) at `ended`, saved and moved to the archive."""
    spec = LoopSpec.from_dict({"name": loop, "intent": "x", "level": "L1"})
    state = RoundState(
        id=rid,
        spec=spec,
        phase=Phase.DONE,
        started_at=ended - 60,
        updated_at=ended,
        ended_at=ended,
        outcome=RoundOutcome.REPORTED,
    )
    store.rounds_of(wd).save(state)
    assert wd.shelf.move(store.LIVE, rid, store.ARCHIVE)
    return rid
