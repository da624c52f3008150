"""`looop rounds --all` lists the archive from a cache while rounds/done/ is unchanged."""

from __future__ import annotations

import json
import os

import pytest

from looop_py.engine.rounds import Phase, RoundState
from looop_py.engine.spec import LoopSpec
from looop_py.loops import store
from looop_py.loops.views import ROWS, list_rounds
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, run_looop
from tests.loops.test_tally import _done, settle
from tests.opens import counted


def _listed(wd: Paths) -> list[dict[str, object]]:
    return [r.to_json() for r in list_rounds(open_wd(wd), include_done=True)]


def _every_row(wd: Paths) -> list[dict[str, object]]:
    """What `rounds --all` listed before the cache: every round read."""
    return [r.to_json() for r in store.rows(open_wd(wd).shelf, include_done=True)]


S = "the folder's stamp"
ROW = ["sweep-0001", "sweep", "done", "reported", None, 1.0, 2.0, 5, None, None, None]


@pytest.mark.parametrize(
    "damage",
    [
        "{not json",
        "[]",
        {"v": 1, "rows": [ROW]},  # no stamp
        {"v": 2, "stamp": S, "rows": [ROW]},
        {"v": 1, "stamp": S, "rows": "x"},
        {"v": 1, "stamp": S, "rows": [ROW[:-1]]},  # one field short
        {"v": 1, "stamp": S, "rows": [[*ROW[:7], -1, *ROW[8:]]]},  # negative tokens
        {"v": 1, "stamp": S, "rows": [[*ROW[:7], True, *ROW[8:]]]},  # a bool is no count
        {"v": 1, "stamp": S, "rows": [[*ROW[:5], "soon", *ROW[6:]]]},  # a start that is no number
        {"v": 1, "stamp": S, "rows": [[5, *ROW[1:]]]},  # an id that is no string
        {"v": 1, "stamp": S, "rows": [[*ROW[:3], 7, *ROW[4:]]]},  # an outcome that is no string
    ],
)
def test_a_damaged_rows_cache_is_read_afresh(wd: Paths, damage: object) -> None:
    for n in range(3):
        _done(wd, n)
    assert _listed(wd) == _every_row(wd)
    cache = wd.state / ROWS
    stamp = json.loads(cache.read_bytes())["stamp"]
    if isinstance(damage, dict) and damage.get("stamp") == S:
        damage = {**damage, "stamp": stamp}  # the stamp fits: only the rows are wrong
    cache.write_text(damage if isinstance(damage, str) else json.dumps(damage))
    assert _listed(wd) == _every_row(wd)
    assert len(_listed(wd)) == 3


def test_a_folder_changed_within_its_tick_is_not_cached(wd: Paths) -> None:
    _done(wd, 0)
    os.utime(wd.rounds / "done")  # changed just now: its stat may not move again
    assert _listed(wd) == _every_row(wd)
    assert not (wd.state / ROWS).exists()


def test_the_rows_follow_every_round_archived_deleted_or_unreadable(wd: Paths) -> None:
    assert _listed(wd) == []
    ids = [_done(wd, n) for n in range(4)]
    assert _listed(wd) == _every_row(wd)
    assert len(_listed(wd)) == 4
    assert open_wd(wd).shelf.delete(store.ARCHIVE, ids[0])  # as retention deletes
    settle(wd)
    assert _listed(wd) == _every_row(wd)
    assert [r["id"] for r in _listed(wd)] == ids[1:]
    (wd.rounds / "done" / "sweep-0100.json").write_text("{not json")
    settle(wd)
    assert _listed(wd) == _every_row(wd)
    assert "unreadable" in [r["phase"] for r in _listed(wd)]
    live = RoundState(
        id="sweep-live",
        spec=LoopSpec.from_dict({"name": "sweep", "intent": "x", "level": "L1"}),
        phase=Phase.MAKER_RUNNING,
        started_at=1_800_000_000.0,
        updated_at=1_800_000_000.0,
    )
    store.rounds_of(open_wd(wd)).save(live)
    assert _listed(wd) == _every_row(wd)
    assert _listed(wd)[-1]["id"] == "sweep-live"


ROUNDS_ALL = """
from looop_py.loops.views import list_rounds
rows = list_rounds(wd, include_done=True)
print(json.dumps([len(rows), sorted(k for k in opens if k.startswith("rounds/"))]))
"""


def test_rounds_all_reads_no_archived_round_while_the_archive_is_unchanged(wd: Paths) -> None:
    for n in range(5):
        _done(wd, n)
    n, opened = counted(wd.root, ROUNDS_ALL)
    assert n == 5 and len(opened) == 5  # read once, and kept
    n, opened = counted(wd.root, ROUNDS_ALL)
    assert n == 5 and opened == []
    done = run_looop("-C", str(wd.root), "rounds", "--all", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rounds"] == _every_row(wd)
