"""Retention: history records go by age and count, never one a report, a round or an id needs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from looop_py.asks import mailbox
from looop_py.beat import prune as expiry  # retention's policy: beat/prune.py
from looop_py.beat import pulse, retention  # the beat's share: beat/retention.py
from looop_py.beat.prune import prune
from looop_py.engine.rounds import Phase, RoundState
from looop_py.engine.spec import LoopSpec
from looop_py.loops import store
from looop_py.workdir import shelf
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd
from tests.history import archive_round

DAY = 86400.0
NOW = time.time()  # the CLI below reads the real clock


def _round(paths: Paths, loop: str, ended: float, *, n: int = 0) -> str:
    """A finished round of `loop`, archived in rounds/done/ as the beat archives one."""
    return archive_round(open_wd(paths), f"{loop}-{int(ended)}-{n}", ended, loop=loop)


def _answered(paths: Paths, asker: str, at: float) -> str:
    wd = open_wd(paths)
    ask = mailbox.open_ask(wd, prompt="ok?", asker=asker, now=at - 10)
    mailbox.answer(wd, ask.id, "yes", now=at)
    return ask.id


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = (Path(dirpath) / name).stat()
            out[os.path.relpath(Path(dirpath) / name, root)] = (st.st_mtime_ns, st.st_size)
    return out


def _retention(paths: Paths, **keys: object) -> None:
    lines = "".join(f"{k} = {v}\n" for k, v in keys.items())
    paths.config.write_text(f'[decider]\nbackend = "noop"\n\n[retention]\n{lines}')


# -- the rule ---------------------------------------------------------------------------------


def test_pick_never_takes_a_protected_record_and_doubts_a_record_without_a_time() -> None:
    rows = [("a", NOW - 40 * DAY), ("b", None), ("c", NOW - DAY), ("d", NOW - 50 * DAY)]
    got = expiry.pick(rows, NOW, keep_s=30 * DAY, keep=10, protected=frozenset({"d"}))
    assert got == [("b", "older than 30 days"), ("a", "older than 30 days")]


def test_pick_keeps_the_newest_by_count_and_protected_ones_count_as_kept() -> None:
    rows = [(f"r{i}", NOW - i * 60.0) for i in range(6)]  # r0 newest
    got = expiry.pick(rows, NOW, keep_s=30 * DAY, keep=3, protected=frozenset({"r5"}))
    assert [name for name, _ in got] == ["r4", "r3"]
    assert all(why == "beyond the newest 3" for _, why in got)


# -- what must stay ---------------------------------------------------------------------------


def test_a_round_a_report_names_stays_past_its_age(wd: Paths) -> None:
    old = _round(wd, "sweep", NOW - 90 * DAY)
    other = _round(wd, "sweep", NOW - 80 * DAY)
    store.note_report(open_wd(wd).shelf, "sweep", old)
    gone = [e.name for e in expiry.due(open_wd(wd, lambda: NOW), NOW)]
    assert gone == [other]


def test_an_ask_a_live_round_or_a_pending_approval_needs_stays(wd: Paths) -> None:
    waited = _answered(wd, "loop", NOW - 90 * DAY)
    approved = _answered(wd, "decider", NOW - 90 * DAY)
    _answered(wd, "decider", NOW - 89 * DAY)
    _answered(wd, "loop", NOW - 89 * DAY)
    box = open_wd(wd).shelf
    spec = LoopSpec.from_dict({"name": "sweep", "intent": "x", "level": "L1"})
    live = RoundState(
        id="live-1", spec=spec, phase=Phase.AWAITING_APPROVAL, started_at=NOW, updated_at=NOW
    )
    record = {**live.to_dict(), "ask": waited}
    shelf.write_json(box, store.LIVE, "live-1", record)
    shelf.write_json(box, "approved", approved, {"v": 1})
    gone = {e.name for e in expiry.due(open_wd(wd), NOW)}
    assert waited not in gone and approved not in gone
    assert gone == set()  # the newest of each asker stays too: ids never go backwards


def test_a_pruned_ask_id_is_never_handed_out_again(wd: Paths) -> None:
    first = [_answered(wd, "human", NOW - (90 - i) * DAY) for i in range(3)]
    assert first == ["human-1", "human-2", "human-3"]
    pruned = prune(open_wd(wd, lambda: NOW))
    assert [e.name for e in pruned.history_removed] == ["human-1", "human-2"]
    assert open_wd(wd).shelf.names("asks") == ["human-3"]
    assert mailbox.open_ask(open_wd(wd), prompt="again?", asker="human", now=NOW).id == "human-4"


def test_an_answer_whose_ask_is_gone_is_history_too(wd: Paths) -> None:
    """retention.delete takes the ask first (an ask left alone would look unanswered
    again), so a prune that dies in between leaves a lone answer: the next look takes it."""
    ask_id = _answered(wd, "human", NOW - 90 * DAY)
    _answered(wd, "human", NOW)
    box = open_wd(wd).shelf
    assert box.delete("asks", ask_id)  # a prune that died between the two deletes
    assert ask_id not in {a.id for a in mailbox.pending(open_wd(wd))}
    (gone,) = expiry.due(open_wd(wd), NOW)  # the lone answer is still history, and goes
    assert gone.name == ask_id and expiry.delete(open_wd(wd), [gone]) == [gone]
    assert not box.get("answers", ask_id)


# -- dry run ----------------------------------------------------------------------------------


def test_a_dry_run_changes_nothing_and_says_what_would_go(wd: Paths) -> None:
    rounds = [_round(wd, "sweep", NOW - d * DAY) for d in (60, 40, 1)]
    asks = [_answered(wd, "human", NOW - d * DAY) for d in (45, 2)]
    before = _tree(wd.root)
    dry = prune(open_wd(wd, lambda: NOW), dry_run=True)
    assert _tree(wd.root) == before
    assert dry.dry_run and [e.name for e in dry.history_removed] == [*rounds[:2], asks[0]]
    shown = invoke_looop("-C", str(wd.root), "prune", "--dry-run", "--json")
    assert shown.returncode == 0, shown.stderr
    assert _tree(wd.root) == before
    data = json.loads(shown.stdout)
    assert data["dry_run"] is True
    names = [e["name"] for e in data["history_removed"]]
    assert rounds[0] in names and rounds[2] not in names
    human = invoke_looop("-C", str(wd.root), "prune", "--dry-run")
    assert f"would remove rounds-done {rounds[0]} (older than 30 days)" in human.stdout
    assert _tree(wd.root) == before
    done = prune(open_wd(wd, lambda: NOW))
    assert [e.name for e in done.history_removed] == [e.name for e in dry.history_removed]
    assert open_wd(wd).shelf.names(store.ARCHIVE) == [rounds[2]]


# -- the beat ---------------------------------------------------------------------------------


def test_a_beat_deletes_at_most_per_beat_and_the_next_beat_takes_the_rest(wd: Paths) -> None:
    _retention(wd, rounds_keep=2, per_beat=3)
    made = [_round(wd, "sweep", NOW - 3600 * (i + 2), n=i) for i in range(7)]
    clock = iter(NOW + i for i in range(100))
    now = lambda: next(clock)  # noqa: E731 - a clock that moves on each read
    pulse.beat(open_wd(wd, now), force=True)
    left = open_wd(wd).shelf.names(store.ARCHIVE)
    assert len(left) == 4  # 5 due, 3 gone; a backlog: the next beat looks again
    pulse.beat(open_wd(wd, now), force=True)
    assert sorted(open_wd(wd).shelf.names(store.ARCHIVE)) == sorted(made[:2])
    events = [json.loads(line) for line in wd.events.read_text().splitlines()]
    pruned = [e for e in events if e["event"] == "history_pruned"]
    assert [e["removed"] for e in pruned] == [{"rounds-done": 3}, {"rounds-done": 2}]
    assert [e["backlog"] for e in pruned] == [True, False]


def test_a_beat_looks_at_history_at_most_hourly_when_nothing_is_due(wd: Paths) -> None:
    _retention(wd, rounds_keep=1)
    _round(wd, "sweep", NOW - 3600)
    pulse.beat(open_wd(wd, lambda: NOW), force=True)
    _round(wd, "sweep", NOW - 1800)  # now one is beyond the newest 1
    pulse.beat(open_wd(wd, lambda: NOW + 60), force=True)
    assert len(open_wd(wd).shelf.names(store.ARCHIVE)) == 2  # not looked at: not due
    pulse.beat(open_wd(wd, lambda: NOW + retention.LOOK_EVERY_S + 1), force=True)
    assert len(open_wd(wd).shelf.names(store.ARCHIVE)) == 1


@pytest.mark.parametrize("damage", [b"{not json", b"[]", b'{"next_at": "soon"}'])
def test_a_damaged_retention_record_means_look_now(wd: Paths, damage: bytes) -> None:
    _retention(wd, rounds_keep=1)
    _round(wd, "sweep", NOW - 3600, n=1)
    _round(wd, "sweep", NOW - 1800, n=2)
    (wd.state / "retention.json").write_bytes(damage)
    pulse.beat(open_wd(wd, lambda: NOW), force=True)
    assert len(open_wd(wd).shelf.names(store.ARCHIVE)) == 1
    record = json.loads((wd.state / "retention.json").read_bytes())
    assert record["next_at"] == NOW + retention.LOOK_EVERY_S


def test_the_answered_history_the_page_shows_lies_within_retention(wd: Paths) -> None:
    from looop_py.web.history import ANSWERED_SHOWN, answered

    ids = [_answered(wd, "human", NOW - 3600 + i) for i in range(ANSWERED_SHOWN + 5)]
    _retention(wd, asks_keep=ANSWERED_SHOWN)
    prune(open_wd(wd, lambda: NOW))
    assert sorted(open_wd(wd).shelf.names("answers")) == sorted(ids[5:])
    shown = [row["ask"]["id"] for row in answered(open_wd(wd))]
    assert shown == ids[5:][::-1]  # the page's whole list, newest first, none missing
