"""The quiet beat while a loop round awaits a human's approval (beat/vouch.py `rounds_now`).

An L2/L3 round whose proposal waits for `looop approve` can wait for days. ADVANCE steps
it on only when an answer to its ask appears (approved, denied, or a forgery it refuses)
or its ask goes (denied): a human's time is not on its wall budget, and a loop's approval
ask has no waiting process to expire it. So the seal vouches for it by files alone: the
round's record, its ask in asks/, no answer in answers/, its claim (the round is the
claim's holder, with no process). The hostile question first: can the seal vouch for a
round the next beat must step on? `looop sense` is the oracle of the world, and the
round's record after the beat says the round was stepped as a full beat does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from looop_py.beat import vouch
from looop_py.moves import gate, union
from looop_py.sensing import seal
from looop_py.workdir.paths import Paths
from tests.beat.test_quiet import _last_beat, _pulse, _quiet_wd, _sensed_hash
from tests.beat.test_quiet_round import _round, _running_round, _sealed_once, release
from tests.conftest import invoke_looop, open_wd, wait_for

__all__ = ["release"]  # the fixture, shared with test_quiet_round


def _awaiting(wd: Paths, release: Path, **extra: str) -> str:
    """An L2 round whose maker and checker ended, its proposal waiting for a human, sealed."""
    (wd.root / "looop.toml").write_text(
        (wd.root / "looop.toml").read_text() + '\n[actions.apply]\ncommand = "true"\n'
    )
    _running_round(wd, release, action="apply", level="L2-assisted", **extra)
    release.touch()
    (release.parent / "release-checker").touch()
    wait_for(lambda: _pulse(wd) and _round(wd)["phase"] == "awaiting-approval", 20, "an ask")
    _sealed_once(wd)
    return str(_round(wd)["ask"])


def _ask(wd: Paths, ask_id: str) -> dict[str, Any]:
    return dict(json.loads((wd.asks / f"{ask_id}.json").read_text()))


def _approved(wd: Paths, ask_id: str) -> dict[str, str]:
    unverified = ["--unverified"] if _ask(wd, ask_id)["hold"].get("verified") is False else []
    done = invoke_looop("-C", str(wd.root), "approve", ask_id, *unverified)
    assert done.returncode == 0, done.stderr
    return {"phase": "done", "outcome": "proceeded", "answer": "approved"}


def _denied(wd: Paths, ask_id: str) -> dict[str, str]:
    done = invoke_looop("-C", str(wd.root), "deny", ask_id, "--reason", "not today")
    assert done.returncode == 0, done.stderr
    return {"phase": "done", "outcome": "escalated", "answer": "denied"}


def _forged(wd: Paths, ask_id: str) -> dict[str, str]:
    """An answer looop did not write: the beat refuses it (asks/forged.py) and keeps waiting."""
    forged = {"v": 1, "ask": ask_id, "answer": "approved", "verdict": "approved"}
    (wd.answers).mkdir(exist_ok=True)
    (wd.answers / f"{ask_id}.json").write_text(json.dumps({**forged, "answered_at": time.time()}))
    return {"phase": "awaiting-approval", "answer": "-"}


def _ask_expired(wd: Paths, ask_id: str) -> dict[str, str]:
    """As a `looop ask --timeout` marks its own ask: the round does not read it."""
    path = wd.asks / f"{ask_id}.json"
    path.write_text(json.dumps({**_ask(wd, ask_id), "expired_at": time.time()}))
    return {"phase": "awaiting-approval", "answer": "-"}


def _ask_removed(wd: Paths, ask_id: str) -> dict[str, str]:
    (wd.asks / f"{ask_id}.json").unlink()
    return {"phase": "done", "outcome": "escalated", "answer": "denied"}


def _round_edited(wd: Paths, ask_id: str) -> dict[str, str]:
    (path,) = wd.rounds.glob("*.json")
    path.write_text(path.read_text().replace('"awaiting-approval"', '"escalate"'))
    return {"phase": "awaiting-approval", "answer": "-"}  # the same key finds the same ask


def _round_rewritten(wd: Paths, ask_id: str) -> dict[str, str]:
    (path,) = wd.rounds.glob("*.json")
    path.write_text(path.read_text())
    return {"phase": "awaiting-approval", "answer": "-"}


def _claim_removed(wd: Paths, ask_id: str) -> dict[str, str]:
    (path,) = wd.claims.glob("*.json")
    path.unlink()
    return {"phase": "awaiting-approval", "answer": "-"}


def _temp_file_in_asks(wd: Paths, ask_id: str) -> dict[str, str]:
    (wd.asks / f".{ask_id}.tmp").write_text("{}")  # an ask being written, or debris
    return {"phase": "awaiting-approval", "answer": "-"}


APPROVAL_MUTATIONS: dict[str, Callable[[Paths, str], dict[str, str]]] = {
    "the human approves": _approved,
    "the human denies": _denied,
    "a forged answer is written": _forged,
    "the ask is marked expired": _ask_expired,
    "the ask is removed": _ask_removed,
    "round record edited": _round_edited,
    "round record rewritten": _round_rewritten,
    "round's claim removed": _claim_removed,
    "a temp file in asks/": _temp_file_in_asks,
}


@pytest.mark.parametrize("name", sorted(APPROVAL_MUTATIONS))
def test_no_approval_change_slips_past_the_seal(wd: Paths, release: Path, name: str) -> None:
    ask_id = _awaiting(wd, release)
    assert _pulse(wd).get("sealed") is True
    want = APPROVAL_MUTATIONS[name](wd, ask_id)
    beat = _pulse(wd)
    assert not beat.get("sealed"), f"{name}: the seal vouched for a round that changed"
    assert beat["world_hash"] == _sensed_hash(wd)
    got = _round(wd) if list(wd.rounds.glob("*.json")) else {}
    seen = {k: str(got.get(k) or "-") for k in want}
    assert seen == want, got


def test_a_forged_answer_is_refused_as_before(wd: Paths, release: Path) -> None:
    """The full beat the forgery forces moves it aside and journals it, as every beat did."""
    ask_id = _awaiting(wd, release)
    _forged(wd, ask_id)
    assert not _pulse(wd).get("sealed")
    assert not (wd.answers / f"{ask_id}.json").exists()
    forged = [json.loads(p.read_text()) for p in (wd.root / "state" / "forged").glob("*.json")]
    assert [f["ask"] for f in forged] == [ask_id], forged
    assert _ask(wd, ask_id)["id"] == ask_id  # still waiting for a genuine answer


def test_a_round_awaiting_approval_stays_quiet(wd: Paths, release: Path) -> None:
    """Its claim has no process: the round is its holder, by its record's stat. A human's
    time is not on the wall budget, so that budget does not bound the seal."""
    ask_id = _awaiting(wd, release, budget="{max_wall_s: 30}")
    sealed = seal.read(str(wd.root))
    assert sealed is not None
    assert any(ln.startswith(f"f asks/{ask_id}.json ") for ln in sealed.survey)
    assert any(ln.startswith("f claims/") for ln in sealed.survey)
    assert sealed.until > _round(wd)["started_at"] + 30, sealed.until
    for _ in range(3):
        beat = _pulse(wd)
        assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
    assert beat["world_hash"] == beat["prev_hash"] == _sensed_hash(wd)
    assert _round(wd)["phase"] == "awaiting-approval"


def test_a_round_with_an_answer_there_is_not_vouched_for(wd: Paths, release: Path) -> None:
    """An answer the seal's own survey saw (written while the beat ran) is for the next
    beat to take or refuse: rounds_now does not vouch for the round, nor for its claim."""
    ask_id = _awaiting(wd, release)
    assert vouch.rounds_now(open_wd(wd)) is not None
    _forged(wd, ask_id)
    assert vouch.rounds_now(open_wd(wd)) is None
    assert vouch.claims_now(open_wd(wd), lambda: None) is None
    (wd.answers / f"{ask_id}.json").unlink()
    (wd.asks / f"{ask_id}.json").unlink()
    assert vouch.rounds_now(open_wd(wd)) is None  # the next beat denies it


def _sealed_with(wd: Paths, line: str) -> None:
    """Beat until a beat seals a survey holding `line`'s start."""

    def sealed() -> bool:
        found = seal.read(str(wd.root))
        if found is not None and any(ln.startswith(line) for ln in found.survey):
            return True
        _pulse(wd)
        return False

    wait_for(sealed, 20, lambda: f"a seal; the last beat: {_last_beat(wd)}", interval=0.2)


def test_a_held_move_awaiting_approval_stays_quiet(wd: Paths) -> None:
    """A decider's move the gate held for a human: its ask has no waiter (asks_now)."""
    _quiet_wd(wd)
    move = union.parse({"action": "run_shell", "cmd": "true"})
    held = gate.admit(open_wd(wd), move, time.time()).held
    assert held is not None
    _sealed_with(wd, f"f asks/{held}.json ")
    for _ in range(2):
        beat = _pulse(wd)
        assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
    assert beat["world_hash"] == _sensed_hash(wd)
    invoke_looop("-C", str(wd.root), "deny", held)
    beat = _pulse(wd)
    assert not beat.get("sealed") and beat["world_hash"] == _sensed_hash(wd)


def test_a_workers_pending_ask_stays_quiet_until_it_is_answered(wd: Paths) -> None:
    """`looop ask` from a worker: the asking process and the worker are the holders."""
    _quiet_wd(wd)
    asks = '"$LOOOP_BIN" ask --prompt "ship it?"; sleep 600'
    started = invoke_looop("-C", str(wd.root), "worker", "start", "w1", "--runtime", "shell", asks)
    assert started.returncode == 0, started.stderr
    try:
        wait_for(lambda: list(wd.asks.glob("*.json")), 10, "the worker's ask")
        (path,) = wd.asks.glob("*.json")
        wait_for(lambda: "waiter" in path.read_text(), 10, "the asker to record itself")
        assert json.loads(path.read_text())["asker"] == "w1"  # asked by the worker
        _sealed_with(wd, f"f asks/{path.name} ")
        for _ in range(2):
            beat = _pulse(wd)
            assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
        assert beat["world_hash"] == _sensed_hash(wd)
        invoke_looop("-C", str(wd.root), "answer", path.stem, "yes")
        beat = _pulse(wd)
        assert not beat.get("sealed") and beat["world_hash"] == _sensed_hash(wd)
    finally:
        invoke_looop("-C", str(wd.root), "worker", "kill", "w1")
