"""A full beat under `looop up` takes goals/ as the inotify watch vouches for it
(ops/goalwatch.py `vouched`, workdir/watched.py), so it lstats no goal while none changed.

The truth is a fresh listing: whatever the beat takes from the watch must give the same
listing, refusals, goal side, seal listing, world items and world hash as the beat's own
listing of goals/ would, now. Real inotify on real folders, a recorded goal side (the
usual full beat at 10,000 goals); rainy days first.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from looop_py import jsonio
from looop_py.beat import pulse
from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.ops.goalwatch import GoalWatch
from looop_py.ops.resident import up_beat
from looop_py.sensing import survey
from looop_py.sensing.sense import sense
from looop_py.workdir import goalcache, goals
from looop_py.workdir.goalside import Side
from looop_py.workdir.paths import Paths
from looop_py.workdir.watched import Watched
from tests.conftest import open_wd, wait_for, write_sensor
from tests.edits import edit_in_place, goals_dir, settle

N = 40


class Spy:
    """The watch's own `vouched`, each answer kept (None: it did not vouch)."""

    def __init__(self, watch: GoalWatch) -> None:
        self.watch = watch
        self.answers: list[Watched | None] = []

    def vouched(self, fd: int) -> Watched | None:
        got = self.watch.vouched(fd)
        self.answers.append(got)
        return got

    def holds(self, held: Watched) -> bool:
        return self.watch.holds(held)


def _taken(wd: Paths, vouch: Spy | None) -> dict[str, Any]:
    """What a beat's scope makes of goals/: listed by itself, or as `vouch` vouches."""
    w = open_wd(wd)
    with w.memo.scope():
        if vouch is not None:
            goals.list_with(w, vouch)
        found, refused, record, side, key, splice = goals._listed(w)
        world = sense(w, 1_800_000_000.0, persist=False)
        sealed = goals.for_seal(w)(world.goals)
    if isinstance(side, Side):
        side = ("side", side.record, side.ids, side.stamps, side.items, side.fenced)
    return {
        "found": found,
        "refused": refused,
        "record": record,
        "side": side,
        "key": key,
        "spliced": None if splice is None else sorted(splice.extra.items()),
        "seal": sealed,
        "items": list(world.items.items()),
        "hash": (world.hash, world.policy),
        "goals": [(g.id, g.stamp, g.digest, g.fenced, g.error) for g in world.goals],
    }


# What a listing gives whatever the clock: the rest (the goal side, the seal's listing) also
# rests on how long ago goals/ and each goal last changed (RACY_NS), so it is compared once
# that window has passed.
TIMELESS = ("found", "refused", "items", "hash", "goals")


def _out_of_the_racy_window(wd: Paths) -> None:
    try:
        stats = [os.lstat(wd.goals), *(os.lstat(p) for p in wd.goals.iterdir())]
    except FileNotFoundError:
        return
    newest = max(max(st.st_mtime_ns, st.st_ctime_ns) for st in stats)
    wait_for(lambda: time.time_ns() - newest > goalcache.RACY_NS, what="the racy window")


def _same(wd: Paths, watch: GoalWatch) -> tuple[dict[str, Any], Watched | None]:
    """The beat's scope as the watch vouches for goals/, which must be the fresh listing's:
    at once, and all of it once the racy window passed. The watch's first answer."""
    spy = Spy(watch)
    took, fresh = _taken(wd, spy), _taken(wd, None)
    for part in TIMELESS:
        assert took[part] == fresh[part], part
    _out_of_the_racy_window(wd)
    later, fresh = _taken(wd, spy), _taken(wd, None)
    for part, value in fresh.items():
        assert later[part] == value, part
    assert [later[part] for part in TIMELESS] == [took[part] for part in TIMELESS]
    assert len(spy.answers) in (0, 2)  # none: goals/ could not be opened, nothing to vouch for
    return later, spy.answers[0] if spy.answers else None


@pytest.fixture
def watch(wd: Paths) -> Iterator[GoalWatch]:
    goals_dir(wd)
    pulse.beat(open_wd(wd), force=True)
    assert wd.goals_seen.exists(), "the goal side is recorded, as at 10,000 settled goals"
    found = GoalWatch(str(wd.goals))
    assert found.listed() is not None  # the quiet attempt's listing
    yield found
    found.close()


def _beats(wd: Paths) -> list[dict[str, Any]]:
    lines = wd.events.read_bytes().splitlines()
    return [e for e in map(jsonio.loads, lines) if e.get("event") == "beat"]


def _changed(result: BeatResult) -> set[str]:
    return {c.item for c in result.changed}


def _item(taken: dict[str, Any], goal_id: str) -> str:
    return dict(taken["items"])[f"goal:{goal_id}"]


# -- what the watch must not vouch for ---------------------------------------------


def test_a_goal_edited_in_place_between_the_watchs_listing_and_the_beat(
    wd: Paths, watch: GoalWatch
) -> None:
    before, _ = _same(wd, watch)
    listings = watch.listings
    edit_in_place(wd.goals / "goal-007.md", "# Goal 7\n\nKeep thing X tidy.\n")
    after, held = _same(wd, watch)
    assert held is not None and watch.listings == listings  # only that goal lstat'ed again
    assert watch.restats == 1
    assert _item(after, "goal-007") != _item(before, "goal-007")
    assert after["hash"] != before["hash"]


def test_a_goal_edited_while_its_write_is_still_open(wd: Paths, watch: GoalWatch) -> None:
    before, _ = _same(wd, watch)
    with open(wd.goals / "goal-001.md", "a", encoding="utf-8") as f:
        f.write("more\n")
        f.flush()  # IN_MODIFY now; IN_CLOSE_WRITE only at the close
        during, _ = _same(wd, watch)
    assert _item(during, "goal-001") != _item(before, "goal-001")


def test_goals_written_in_place_alongside_other_changes(wd: Paths, watch: GoalWatch) -> None:
    """Only writes and attribute changes to plain goals keep the listing (those goals are
    lstat'ed again); anything else in the same events lists goals/ again."""
    before, _ = _same(wd, watch)
    listings = watch.listings
    edit_in_place(wd.goals / "goal-014.md", "# Goal 14\n\nKeep thing AA tidy.\n")
    (wd.goals / "swap.tmp").write_text("# Goal 15\n\nKeep thing 15 neat.\n")
    os.rename(wd.goals / "swap.tmp", wd.goals / "goal-015.md")  # renamed over: listed again
    after, _ = _same(wd, watch)
    assert watch.listings == listings + 1
    assert _item(after, "goal-014") != _item(before, "goal-014")
    assert _item(after, "goal-015") != _item(before, "goal-015")
    edit_in_place(wd.goals / "goal-016.md", "# Goal 16\n\nKeep thing BB tidy.\n")
    os.link(wd.goals / "goal-016.md", wd.root / "twin.md")  # its link count: IN_ATTRIB
    linked, _ = _same(wd, watch)
    assert watch.listings == listings + 2  # no longer a plain goal: listed again
    edit_in_place(wd.root / "twin.md", "# Goal 16\n\nKeep thing CC tidy.\n")
    through, _ = _same(wd, watch)  # written through its other name: no event in goals/
    assert _item(through, "goal-016") != _item(linked, "goal-016")
    edit_in_place(wd.goals / "goal-017.md", "# Goal 17\n\nKeep thing DD tidy.\n")
    assert watch.changed()  # the write is read, then the goal goes
    (wd.goals / "goal-017.md").unlink()
    gone, _ = _same(wd, watch)
    assert "goal-017" not in dict(gone["found"])
    (wd.goals / "notes.txt").write_text("not a goal\n")
    edit_in_place(wd.goals / "goal-018.md", "# Goal 18\n\nKeep thing EE tidy.\n")
    _same(wd, watch)


@pytest.mark.parametrize("target", ["inside", "outside", "dangling"])
def test_a_goal_replaced_by_a_link(wd: Paths, watch: GoalWatch, target: str) -> None:
    before, _ = _same(wd, watch)
    there = {
        "inside": wd.root / "notes.md",
        "outside": wd.root.parent / "outside.md",
        "dangling": wd.root / "nowhere.md",
    }[target]
    if target != "dangling":
        there.write_text("# Goal 3\n\nKeep thing 3 tidy.\n")  # the same bytes as before
    (wd.goals / "tmp-link").symlink_to(there)
    os.rename(wd.goals / "tmp-link", wd.goals / "goal-003.md")
    after, held = _same(wd, watch)
    assert held is not None and "goal-003.md" in held.links
    assert after["side"] is False and after["seal"] is None  # a link: neither may be taken
    if target == "outside":
        assert "goal-003" in after["refused"]
    assert after["hash"] != before["hash"] or target == "inside"


def test_a_hard_linked_goal_written_through_its_other_name(wd: Paths, tmp_path: Path) -> None:
    goals_dir(wd)
    twin = wd.root / "twin.md"
    os.link(wd.goals / "goal-002.md", twin)  # no event in goals/ when written through `twin`
    pulse.beat(open_wd(wd), force=True)
    watch = GoalWatch(str(wd.goals))
    try:
        before, held = _same(wd, watch)
        assert held is not None
        listings = watch.listings
        edit_in_place(twin, "# Goal 2\n\nKeep thing Z tidy.\n")
        after, held = _same(wd, watch)
        assert held is not None and watch.listings == listings + 1  # re-stat'ed, listed again
        assert _item(after, "goal-002") != _item(before, "goal-002")
    finally:
        watch.close()


def test_goals_replaced_by_another_folder(wd: Paths, watch: GoalWatch) -> None:
    before, _ = _same(wd, watch)
    other = wd.root / "other"
    shutil.copytree(wd.goals, other)
    edit_in_place(other / "goal-011.md", "# Goal 11\n\nKeep thing YY tidy.\n")
    os.rename(wd.goals, wd.root / "goals.old")
    os.rename(other, wd.goals)
    after, _ = _same(wd, watch)
    assert _item(after, "goal-011") != _item(before, "goal-011")
    edit_in_place(wd.root / "goals.old" / "goal-012.md", "# Goal 12\n\nKeep thing WW tidy.\n")
    edit_in_place(wd.goals / "goal-013.md", "# Goal 13\n\nKeep thing VV tidy.\n")
    again, held = _same(wd, watch)
    assert held is not None  # the new folder is the one watched
    assert _item(again, "goal-012") == _item(before, "goal-012")
    assert _item(again, "goal-013") != _item(before, "goal-013")


def test_goals_removed_and_made_again_with_other_goals(wd: Paths, watch: GoalWatch) -> None:
    _same(wd, watch)
    shutil.rmtree(wd.goals)
    gone, held = _same(wd, watch)
    assert held is None and gone["found"] == []
    wd.goals.mkdir()
    (wd.goals / "only.md").write_text("# Only\n")
    back, _ = _same(wd, watch)
    assert [g for g, _ in back["found"]] == ["only"]


def test_an_overflowing_event_queue(wd: Paths, watch: GoalWatch) -> None:
    before, _ = _same(wd, watch)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    a, b = wd.goals / "goal-020.md", wd.goals / "goal-021.md"
    keep = os.stat(b).st_mtime_ns
    for i in range(limit // 2 + 10):  # alternating, so the kernel merges none of them
        os.utime(a, ns=(i, i))
        os.utime(b, ns=(i, i))
    edit_in_place(b, "# Goal 21\n\nKeep thing QQ tidy.\n")
    os.utime(b, ns=(keep, keep))
    listings = watch.listings
    after, held = _same(wd, watch)
    assert held is not None and watch.listings == listings + 1
    assert _item(after, "goal-021") != _item(before, "goal-021")


def test_the_watch_gone_or_never_possible(wd: Paths, watch: GoalWatch) -> None:
    """Closed: watched and listed again when asked. goals/ a symlink: never watched, the
    beat lists it itself."""
    _same(wd, watch)
    watch.close()
    edit_in_place(wd.goals / "goal-030.md", "# Goal 30\n\nKeep thing RR tidy.\n")
    after, held = _same(wd, watch)
    assert held is not None
    real = wd.root / "real-goals"
    os.rename(wd.goals, real)
    wd.goals.symlink_to(real)
    linked, held = _same(wd, watch)
    assert held is None and linked["found"] == after["found"]


def test_entries_that_are_no_plain_goal(wd: Paths, watch: GoalWatch) -> None:
    """A FIFO, a directory, an unsafe name, a .sh file and a .sh link, a link out of the
    work dir, a dangling link and names that are no goal: refused, skipped or read as a
    fresh listing does."""
    os.mkfifo(wd.goals / "pipe.md")
    (wd.goals / "folder.md").mkdir()
    (wd.goals / "odd name.md").write_text("# unsafe\n")
    (wd.goals / "run.sh").write_text("echo\n")
    (wd.goals / "linked.sh").symlink_to(wd.goals / "run.sh")
    (wd.root.parent / "far.md").write_text("# Far\n")
    (wd.goals / "far.md").symlink_to(wd.root.parent / "far.md")
    (wd.goals / "lost.md").symlink_to(wd.root / "lost.md")
    (wd.goals / "notes.txt").write_text("no goal\n")
    (wd.goals / "archive").mkdir(exist_ok=True)
    took, held = _same(wd, watch)
    assert held is not None
    assert set(held.links) == {"far.md", "lost.md"}
    assert "far" in took["refused"]
    (wd.goals / "odd name.md").unlink()
    (wd.goals / "linked.sh").unlink()
    settle(*wd.goals.iterdir(), wd.goals)
    _same(wd, watch)  # the seal's listing is taken now: the same as the fresh one's


# -- what it vouches for --------------------------------------------------------------


def test_goals_as_listed_are_taken_with_no_lstat_per_goal(
    wd: Paths, watch: GoalWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    listings = watch.listings
    taken: list[str] = []
    real = os.lstat

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        taken.append(os.fsdecode(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    w = open_wd(wd)
    with w.memo.scope():
        goals.list_with(w, watch)
        side = goals.side(w)
        sense(w, 1_800_000_000.0, persist=False)
    monkeypatch.undo()
    assert side is not None, "the recorded goal side, for the watch's listing"
    assert watch.listings == listings
    assert [p for p in taken if p.endswith(".md")] == []
    took, held = _same(wd, watch)
    assert held is not None and took["side"] is not None and took["seal"] is not None


# -- a goal saved as editors do (a new file renamed over it): goals/ itself just changed ---


def _md_lstats(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The goals os.lstat is called on from now on (by path, or by name beside goals/'s
    descriptor)."""
    taken: list[str] = []
    real = os.lstat

    def lstat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        name = os.fsdecode(path)
        if name.endswith(".md") and ("/" not in name or "/goals/" in name):
            taken.append(name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", lstat)
    return taken


def _saved(path: Path, text: str) -> None:
    """Saved as editors do, and goals/'s mtime ahead of the clock: however slow the machine,
    goals/ changed within RACY_NS of the next listing, whose own record is not reused."""
    new = path.with_name(".saving.tmp")
    new.write_text(text)
    os.rename(new, path)
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(path.parent, ns=(ahead, ahead))


def _sealed_up(wd: Paths, watch: GoalWatch) -> None:
    for _ in range(3):
        up_beat(open_wd(wd), watch)
    assert up_beat(open_wd(wd), watch).outcome is BeatOutcome.SKIPPED
    assert _beats(wd)[-1].get("sealed") is True


def test_a_goal_added_while_the_beat_runs_is_not_sealed_from_the_watch(
    wd: Paths, watch: GoalWatch
) -> None:
    """The beat took the watch's listing; a goal renamed in after it (by a sensor, as the
    beat runs) is an event: the seal does not take the watch's line, and the next beat
    reads the new goal."""
    write_sensor(
        wd,
        "adder",
        "if [ -f add-now ]; then rm add-now; printf '# Late\\n' > late.tmp;"
        " mv late.tmp goals/late.md; fi\necho '{\"signal\": 1}'",
    )
    _sealed_up(wd, watch)
    _saved(wd.goals / "goal-004.md", "# Goal 4\n\nKeep thing 4 neat.\n")  # goals/ changed now
    (wd.root / "add-now").write_text("")
    during = up_beat(open_wd(wd), watch)
    assert during.outcome is BeatOutcome.DECIDED
    assert "goal:goal-004" in _changed(during)
    after = up_beat(open_wd(wd), watch)
    assert "goal:late" in _changed(during) | _changed(after)
    assert up_beat(open_wd(wd), watch).outcome is BeatOutcome.SKIPPED


def test_the_seal_takes_the_watchs_listing_only_while_the_watch_holds_it(
    wd: Paths, watch: GoalWatch
) -> None:
    _saved(wd.goals / "goal-004.md", "# Goal 4\n\nKeep thing 4 neat.\n")
    w = open_wd(wd)
    with w.memo.scope():
        goals.list_with(w, watch)
        world = sense(w, 1_800_000_000.0, persist=False)
        sealing = goals.for_seal(w)
        assert goals.goal_stamps(w) == [(g.id, g.stamp) for g in world.goals]
        assert goals._scan(w)[2] is None  # the beat's own record: not to be reused
    listed = sealing(world.goals)
    assert listed is not None and listed[1] == survey.goals_line(str(wd.goals))
    os.utime(wd.goals / "goal-005.md")  # an event: the watch no longer vouches for it
    assert sealing(world.goals) is None


def test_a_goal_written_in_place_is_the_only_goal_the_full_beat_lstats(
    wd: Paths, watch: GoalWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_sensor(wd, "s0", 'echo \'{"signal": {"n": 0}}\'\n')
    _sealed_up(wd, watch)
    listings = watch.listings
    edit_in_place(wd.goals / "goal-009.md", "# Goal 9\n\nKeep thing F tidy.\n")
    stats = _md_lstats(monkeypatch)
    seen = up_beat(open_wd(wd), watch)
    assert seen.outcome is BeatOutcome.DECIDED and _changed(seen) == {"goal:goal-009"}
    quiet = up_beat(open_wd(wd), watch)
    monkeypatch.undo()
    assert quiet.outcome is BeatOutcome.SKIPPED and _beats(wd)[-1].get("sealed") is True
    assert stats == ["goal-009.md"] and watch.listings == listings


def test_a_goal_saved_by_rename_is_listed_once_by_the_full_beat(
    wd: Paths, watch: GoalWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """goals/ changed within RACY_NS of the beat's listing, so its own record is not reused;
    the seal takes the watch's listing, which it still vouches for, instead of listing and
    lstat'ing every goal again. The next quiet beat lists nothing."""
    write_sensor(wd, "s0", 'echo \'{"signal": {"n": 0}}\'\n')
    _sealed_up(wd, watch)
    listings = watch.listings
    _saved(wd.goals / "goal-009.md", "# Goal 9\n\nKeep thing 9 neat.\n")
    stats = _md_lstats(monkeypatch)
    seen = up_beat(open_wd(wd), watch)
    assert seen.outcome is BeatOutcome.DECIDED and _changed(seen) == {"goal:goal-009"}
    assert _beats(wd)[-1].get("sealed") is not False
    assert watch.listings == listings + 1
    assert len(stats) == N + 1  # the watch's one listing: each goal and fenced.md once
    quiet = up_beat(open_wd(wd), watch)
    monkeypatch.undo()
    assert quiet.outcome is BeatOutcome.SKIPPED and _beats(wd)[-1].get("sealed") is True
    assert len(stats) == N + 1 and watch.listings == listings + 1
