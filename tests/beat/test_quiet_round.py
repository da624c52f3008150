"""The quiet beat while a loop round's worker runs (beat/vouch.py `rounds_now`).

A round whose maker or checker runs waits on nothing but that worker: ADVANCE steps it
on only when the worker's process ends, when its record changes, or when its wall
budget runs out. So the seal vouches for it by the worker's process (pid + create time),
the round's record, the worker's session records and the round's claim (by stat), and
`until` ≤ the round's start + max_wall_s. The hostile question first: can the seal
vouch for a round the next beat must step on? `looop sense` is the oracle of the world,
and the round's record after the beat says the round was stepped as a full beat does.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looop_py.identity import is_alive
from looop_py.loops.advance import start_round
from looop_py.sensing import seal
from looop_py.workdir.paths import Paths
from tests.beat.test_quiet import _last_beat, _pulse, _quiet_wd, _sensed_hash
from tests.conftest import open_wd, wait_for

DONE = '"$LOOOP_BIN" done --summary'
WAITS = "while [ ! -e {release} ]; do sleep 0.05; done; " + DONE + " {what}"


@pytest.fixture
def release(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "release"
    yield path
    path.touch()  # whatever the test did, the maker ends
    (tmp_path / "release-checker").touch()


def _loop_goal(wd: Paths, release: Path, **extra: str) -> None:
    maker = WAITS.format(release=release, what="made")
    checker = WAITS.format(release=f"{release}-checker", what="checked")
    lines = ["---", "intent: sweep the floor", "level: L1-report", "runtime: shell"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    lines += [f"maker: '{maker}'", f"checker: '{checker}'", "---", "# sweep", ""]
    (wd.goals / "sweep.md").write_text("\n".join(lines))


def _round(wd: Paths) -> dict[str, Any]:
    (path,) = wd.rounds.glob("*.json")
    return dict(json.loads(path.read_text()))


def _worker_meta(wd: Paths) -> dict[str, Any]:
    handle = _round(wd)["maker_handle"]
    return dict(json.loads((wd.sessions / handle / "meta.json").read_text()))


def _sealed_once(wd: Paths) -> None:
    """Beat until a beat seals the running round (starting it wakes the loop once)."""

    def sealed() -> bool:
        found = seal.read(str(wd.root))
        if found is not None and any(ln.startswith("r rounds/") for ln in found.survey):
            return True
        _pulse(wd)
        return False

    wait_for(sealed, 20, lambda: f"a seal; the last beat: {_last_beat(wd)}", interval=0.2)


def _running_round(wd: Paths, release: Path, **extra: str) -> Paths:
    _quiet_wd(wd)
    _loop_goal(wd, release, **extra)
    state = start_round(open_wd(wd), "sweep", now=time.time(), trigger="test")
    assert state.phase.value == "maker-running", state
    wait_for(lambda: _worker_meta(wd).get("pid"), 10, "the maker's supervisor to record it")
    _sealed_once(wd)
    return wd


def _maker_ends(wd: Paths, release: Path) -> str:
    meta = _worker_meta(wd)
    status = wd.sessions / meta["id"] / "status.json"
    release.touch()
    wait_for(lambda: not is_alive(meta["pid"], meta["create_time"]), 10, "the maker to end")
    wait_for(lambda: '"exited"' in status.read_text(), 10, "its supervisor to record the end")
    return "checker-running"


def _maker_sigkilled(wd: Paths, release: Path) -> str:
    """Its supervisor first, so nothing rewrites the session's records: only the pid is gone."""
    meta = _worker_meta(wd)
    status = wd.sessions / meta["id"] / "status.json"
    before = status.read_bytes()
    for pid, created in (
        (meta["supervisor_pid"], meta["supervisor_create_time"]),
        (meta["pid"], meta["create_time"]),
    ):
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not is_alive(pid, created), 10, f"{pid} to die")  # noqa: B023
    assert status.read_bytes() == before
    return "done"  # lost, with no result: the maker failed, the round ends


def _round_edited(wd: Paths, release: Path) -> str:
    (path,) = wd.rounds.glob("*.json")
    path.write_text(path.read_text().replace('"maker-running"', '"maker"'))
    return "maker-running"  # the maker step finds its worker started and waits on it again


def _round_rewritten(wd: Paths, release: Path) -> str:
    (path,) = wd.rounds.glob("*.json")
    path.write_text(path.read_text())  # same bytes, another write: re-read by a full beat
    return "maker-running"


def _claim_removed(wd: Paths, release: Path) -> str:
    (path,) = wd.claims.glob("*.json")
    path.unlink()
    return "maker-running"


def _status_rewritten(wd: Paths, release: Path) -> str:
    path = wd.sessions / _worker_meta(wd)["id"] / "status.json"
    path.write_text(path.read_text())
    return "maker-running"


def _temp_file_in_rounds(wd: Paths, release: Path) -> str:
    (wd.rounds / ".sweep.tmp").write_text("{}")  # a save in progress, or debris
    return "maker-running"


ROUND_MUTATIONS = {
    "maker ends": _maker_ends,
    "maker SIGKILLed, its records not rewritten": _maker_sigkilled,
    "round record edited": _round_edited,
    "round record rewritten": _round_rewritten,
    "round's claim removed": _claim_removed,
    "maker's status.json rewritten": _status_rewritten,
    "a temp file in rounds/": _temp_file_in_rounds,
}


@pytest.mark.parametrize("name", sorted(ROUND_MUTATIONS))
def test_no_round_change_slips_past_the_seal(wd: Paths, release: Path, name: str) -> None:
    _running_round(wd, release)
    assert _pulse(wd).get("sealed") is True
    phase = ROUND_MUTATIONS[name](wd, release)
    beat = _pulse(wd)
    assert not beat.get("sealed"), f"{name}: the seal vouched for a round that changed"
    assert beat["world_hash"] == _sensed_hash(wd)
    assert _round(wd)["phase"] == phase, _round(wd)


def test_a_round_past_its_wall_budget_breaks_the_seal(wd: Paths, release: Path) -> None:
    """max_wall_s: the round is stopped by the clock alone; the seal expires first."""
    _running_round(wd, release, budget="{max_wall_s: 6}")
    started = _round(wd)["started_at"]
    sealed = seal.read(str(wd.root))
    assert sealed is not None and sealed.until <= started + 6
    wait_for(lambda: time.time() > started + 6, 15, "the wall budget to run out", interval=0.1)
    beat = _pulse(wd)
    assert not beat.get("sealed") and beat["world_hash"] == _sensed_hash(wd)
    done = _round(wd)
    assert done["phase"] == "done" and done["outcome"] == "budget-exhausted", done


def test_a_running_round_with_a_steady_signal_stays_quiet(wd: Paths, release: Path) -> None:
    _running_round(wd, release)
    sealed = seal.read(str(wd.root))
    assert sealed is not None
    meta = _worker_meta(wd)
    assert (meta["pid"], meta["create_time"]) in sealed.holders
    assert sealed.until <= _round(wd)["started_at"] + 3600  # the default max_wall_s
    for _ in range(3):
        beat = _pulse(wd)
        assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
    assert beat["world_hash"] == beat["prev_hash"] == _sensed_hash(wd)
    assert _round(wd)["phase"] == "maker-running"


def test_a_done_round_is_sealed_until_it_is_archived(wd: Paths, release: Path) -> None:
    """A finished round stays in rounds/ an hour (store.DONE_KEEP_S), then a beat moves it."""
    _running_round(wd, release)
    release.touch()
    (release.parent / "release-checker").touch()
    wait_for(lambda: _pulse(wd) and _round(wd)["phase"] == "done", 20, "the round to end")
    _sealed_once(wd)
    sealed = seal.read(str(wd.root))
    assert sealed is not None and sealed.until <= _round(wd)["ended_at"] + 3600
    assert _pulse(wd).get("sealed") is True
    assert _round(wd)["phase"] == "done"  # not archived yet: the seal expires first


def _next_slot(wd: Paths) -> float:
    book = json.loads((wd.root / "state" / "loop-schedule.json").read_text())
    return float(book["loops"]["sweep"]["next_at"])


def test_a_slot_due_while_its_round_runs_keeps_the_seal_and_fires_once_it_ends(
    wd: Paths, release: Path
) -> None:
    """A loop's slot falls due while its round runs: ADVANCE holds it until the round
    ends (one live round per loop), so the clock alone changes nothing; the round's end
    breaks the seal, and that full beat starts the due round as it always did."""
    _running_round(wd, release, cadence="every 2s")
    slot = _next_slot(wd)
    wait_for(lambda: time.time() > slot + 0.1, 10, "the loop's slot to fall due", interval=0.1)
    for _ in range(2):
        beat = _pulse(wd)
        assert beat.get("sealed") is True, beat
    assert beat["world_hash"] == _sensed_hash(wd)
    first = _round(wd)["id"]
    assert _round(wd)["phase"] == "maker-running"
    release.touch()
    (release.parent / "release-checker").touch()

    def fired() -> bool:
        beat = _pulse(wd)
        rounds = [json.loads(p.read_text()) for p in wd.rounds.glob("*.json")]
        by_cadence = [r for r in rounds if r["id"] != first and r["trigger"] == "cadence"]
        return bool(by_cadence) and not beat.get("sealed")

    wait_for(fired, 20, lambda: f"a round by cadence: {list(wd.rounds.glob('*.json'))}")
