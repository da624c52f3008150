"""`looop loops` sums the archive from a cache while rounds/done/ is unchanged."""

from __future__ import annotations

import json
import os
import time

import pytest

from looop_py.engine.report import RoundOutcome
from looop_py.engine.rounds import Phase, RoundState
from looop_py.engine.spec import LoopSpec
from looop_py.loops import store
from looop_py.loops.views import TALLY, overview
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd
from tests.opens import counted

LOOP = """---
intent: sweep the repo
level: L1-report
runtime: shell
maker: |
  echo looking
---
# sweep
"""


def _done(wd: Paths, n: int, *, outcome: RoundOutcome = RoundOutcome.REPORTED) -> str:
    spec = LoopSpec.from_dict({"name": "sweep", "intent": "x", "level": "L1"})
    started = 1_700_000_000.0 + n * 60
    state = RoundState(
        id=f"sweep-{n:04}",
        spec=spec,
        phase=Phase.DONE,
        started_at=started,
        updated_at=started + 30,
        ended_at=started + 30,
        outcome=outcome,
        input_tokens=10,
        output_tokens=n,
    )
    w = open_wd(wd)
    store.rounds_of(w).save(state)
    assert w.shelf.move(store.LIVE, state.id, store.ARCHIVE)
    settle(wd)
    return state.id


def settle(wd: Paths) -> None:
    """Date rounds/done/'s last change a minute back: a cache is kept only of a folder that
    changed longer ago than its mtime's tick (views.SETTLE_S)."""
    then = time.time() - 60
    os.utime(wd.rounds / "done", (then, then))


def _row(wd: Paths) -> tuple[int, int, str | None]:
    (row,) = overview(open_wd(wd), time.time()).loops
    return row.rounds, row.tokens, row.last_outcome


def _from_every_row(wd: Paths) -> tuple[int, int, str | None]:
    """What overview said before the tally: every round read and added up."""
    rows = [r for r in store.rows(open_wd(wd).shelf, include_done=True) if r.loop == "sweep"]
    last = next((r.outcome for r in reversed(rows) if r.outcome), None)
    return len(rows), sum(r.tokens for r in rows), last


@pytest.fixture
def looped(wd: Paths) -> Paths:
    (wd.goals / "sweep.md").write_text(LOOP)
    return wd


@pytest.mark.parametrize(
    "damage", [b"{not json", b"[]", b'{"v": 1, "stamp": [], "loops": {"sweep": [1, -1, null]}}']
)
def test_a_damaged_tally_is_summed_afresh(looped: Paths, damage: bytes) -> None:
    for n in range(3):
        _done(looped, n)
    assert _row(looped) == _from_every_row(looped)
    cache = looped.state / TALLY
    record = json.loads(cache.read_bytes())
    cache.write_bytes(damage.replace(b'"stamp": []', f'"stamp": {record["stamp"]}'.encode()))
    assert _row(looped) == _from_every_row(looped) == (3, 30 + 3, "reported")


def test_the_tally_follows_every_round_archived_or_deleted(looped: Paths) -> None:
    assert _row(looped) == (0, 0, None)
    ids = [_done(looped, n) for n in range(4)]
    assert _row(looped) == _from_every_row(looped)
    _done(looped, 9, outcome=RoundOutcome.FAILED)
    assert _row(looped) == _from_every_row(looped) == (5, 50 + 15, "failed")
    assert open_wd(looped).shelf.delete(store.ARCHIVE, ids[0])  # as retention deletes
    settle(looped)
    assert _row(looped) == _from_every_row(looped) == (4, 40 + 15, "failed")
    live = RoundState(
        id="sweep-live",
        spec=LoopSpec.from_dict({"name": "sweep", "intent": "x", "level": "L1"}),
        phase=Phase.MAKER_RUNNING,
        started_at=1_800_000_000.0,
        updated_at=1_800_000_000.0,
        input_tokens=7,
    )
    store.rounds_of(open_wd(looped)).save(live)
    (row,) = overview(open_wd(looped), time.time()).loops
    assert (row.rounds, row.tokens, row.live_round) == (5, 40 + 15 + 7, "sweep-live")


OVERVIEW = """
from looop_py.loops.views import overview
overview(wd, time.time())
print(json.dumps(sorted(k for k in opens if k.startswith("rounds/"))))
"""


def test_looop_loops_reads_no_archived_round_while_the_archive_is_unchanged(
    looped: Paths,
) -> None:
    for n in range(5):
        _done(looped, n)
    first = counted(looped.root, OVERVIEW)
    assert len(first) == 5  # summed once, and kept
    again = counted(looped.root, OVERVIEW)
    assert again == []
