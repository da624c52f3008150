"""A full beat whose listing of goals/ is not the recorded one (workdir/goalsplice.py): the
goals whose own listed stat is the recorded one come from state/goals-seen.bin, only the
others are read. Whatever changed, the world (items, order, hash, policy hash, each goal)
is the full pass's, and the record is rewritten only when the listing may vouch for it."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from looop_py.beat import pulse
from looop_py.sensing.sense import World, sense
from looop_py.workdir import goalcache, goals
from looop_py.workdir.paths import Paths
from looop_py.world import digest
from tests.conftest import open_wd
from tests.edits import goals_dir, settle
from tests.opens import counted
from tests.workdir.test_goal_side import (
    COUNTING,
    DAMAGE,
    N,
    _damage,
    _full_pass,
    _on_disk,
    _recorded,
    _same_world,
    _taken,
    _write_whole,
)


def _as_full(wd: Paths, how: str = "splice", *, disk: bool = True) -> World:
    """The world SENSE gives now is the full pass's (and each goal item the digest of the
    bytes on disk, but for `disk=False`: a refusal), taken `how`."""
    seen, took = _taken(wd)
    assert took == how
    if disk:
        _on_disk(wd, seen)
    _same_world(seen, _full_pass(wd))
    return seen


def _settle_new(wd: Paths) -> None:
    """`settle` the goals changed since the record was written, and goals/: the others
    keep their stat (a utime moves the ctime)."""
    since = wd.goals_seen.stat().st_mtime_ns
    settle(*[p for p in wd.goals.iterdir() if p.lstat().st_ctime_ns >= since], wd.goals)


def _rewrite_keeping_size_and_mtime(goal: Path, text: bytes) -> None:
    st = goal.stat()
    with goal.open("r+b") as f:
        f.write(text[: st.st_size].ljust(st.st_size, b"."))
    os.utime(goal, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (goal.stat().st_size, goal.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)


# -- rainy days first ------------------------------------------------------------------------


def test_a_goal_rewritten_in_place_inside_the_racy_window_is_read(wd: Paths) -> None:
    """Size and mtime kept, the ctime just now: read, not taken from the record; the
    listing is not settled, so no beat records it; a second such rewrite (it could keep
    the whole stat within the clock's tick) is read again, never known by that stat."""
    goals_dir(wd)
    _recorded(wd)
    before = wd.goals_seen.read_bytes()
    goal = wd.goals / "goal-007.md"
    _rewrite_keeping_size_and_mtime(goal, b"# Goal 7\n\nthe FIRST rewrite\n")
    seen = _as_full(wd)
    assert seen.items["goal:goal-007"] == digest(goal.read_bytes())
    pulse.beat(open_wd(wd), force=True)
    if time.time_ns() - goal.stat().st_ctime_ns < goalcache.RACY_NS:
        assert wd.goals_seen.read_bytes() == before, "an unsettled listing was recorded"
    _rewrite_keeping_size_and_mtime(goal, b"# Goal 7\n\nthe SECOND rewrite\n")
    seen = _as_full(wd)
    assert seen.items["goal:goal-007"] == digest(goal.read_bytes())


def test_a_goal_whose_times_are_ahead_is_never_taken_nor_recorded(wd: Paths) -> None:
    """A goal stamped in the listing's future stays inside the racy window: read every beat,
    and the record is never rewritten for a listing that holds it."""
    goals_dir(wd)
    _recorded(wd)
    before = wd.goals_seen.read_bytes()
    goal = wd.goals / "goal-004.md"
    goal.write_text("# Goal 4\n\nedited\n")
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(goal, ns=(ahead, ahead))
    _as_full(wd)
    pulse.beat(open_wd(wd), force=True)
    assert wd.goals_seen.read_bytes() == before
    _as_full(wd)


def test_a_goal_replaced_by_a_symlink_or_a_hard_link_is_read(wd: Paths) -> None:
    goals_dir(wd)
    _recorded(wd)
    before = wd.goals_seen.read_bytes()
    (wd.root / "notes").mkdir()
    inside = wd.root / "notes" / "linked.md"
    inside.write_text("# Goal 1\n\nKeep thing 1 tidy.\n")  # the same bytes: only the kind differs
    (wd.goals / "goal-001.md").unlink()
    (wd.goals / "goal-001.md").symlink_to(inside)
    settle(inside, wd.goals / "goal-001.md", wd.goals)
    _as_full(wd)
    pulse.beat(open_wd(wd), force=True)
    assert wd.goals_seen.read_bytes() == before, "a listing with a link was recorded"

    outside = wd.root.parent / "outside.md"
    outside.write_text("# Goal 1\n\nKeep thing 1 tidy.\n")
    (wd.goals / "goal-001.md").unlink()
    (wd.goals / "goal-001.md").symlink_to(outside)
    seen = _as_full(wd, disk=False)
    out = next(g for g in seen.goals if g.id == "goal-001")
    assert out.error is not None and "outside the work dir" in out.error

    (wd.goals / "goal-001.md").unlink()
    os.link(wd.goals / "goal-002.md", wd.goals / "goal-001.md")  # one inode, two goals
    settle(wd.goals / "goal-001.md", wd.goals)
    seen = _as_full(wd)
    assert seen.items["goal:goal-001"] == seen.items["goal:goal-002"]
    _recorded(wd)
    (wd.goals / "goal-002.md").write_text("# Goal 2, edited through its other name\n")
    seen = _as_full(wd)
    assert seen.items["goal:goal-001"] == seen.items["goal:goal-002"]

    (wd.goals / "goal-003.md").unlink()  # the same name, another inode, the same bytes
    shutil.copy(wd.goals / "goal-002.md", wd.goals / "goal-003.md")
    _as_full(wd)


def test_goals_added_removed_or_renamed_while_the_others_are_kept(wd: Paths) -> None:
    """Each change alone, then all at once: the spliced world is the full pass's, and a
    settled listing is recorded byte for byte as the full pass records it."""
    goals_dir(wd)
    changes = ("add first", "add last", "add between", "remove", "rename", "touch", "unsafe", "all")
    for change in changes:
        _recorded(wd)
        if change in ("add first", "all"):
            (wd.goals / "a-first.md").write_text("# First\n")
        if change in ("add last", "all"):
            (wd.goals / "zz-last.md").write_text("---\non: [s0]\nruntime: shell\n---\n# Last\n")
        if change in ("add between", "all"):
            (wd.goals / "goal-011b.md").write_text("# Between\n")
        if change in ("remove", "all"):
            next(wd.goals.glob("goal-01*.md")).unlink()
        if change in ("rename", "all"):
            next(wd.goals.glob("goal-02*.md")).rename(wd.goals / f"goal-9{len(change)}.md")
        if change == "unsafe":
            (wd.goals / "bad name.md").write_text("# Unsafe\n")
        if change in ("touch", "all"):  # a new stat, the same bytes: the same item
            (wd.goals / "goal-030.md").write_bytes((wd.goals / "goal-030.md").read_bytes())
        _settle_new(wd)
        seen = _as_full(wd, disk=change != "unsafe")  # an unsafe name: no goal
        assert "goal:bad name" not in seen.items
        if change == "unsafe":  # an .md that is no goal: the seal's listing never vouches
            (wd.goals / "bad name.md").unlink()
            settle(wd.goals)
            continue
        pulse.beat(open_wd(wd), force=True)
        spliced = wd.goals_seen.read_bytes()
        wd.goals_seen.unlink()
        pulse.beat(open_wd(wd), force=True)
        assert wd.goals_seen.read_bytes() == spliced, f"{change}: not the full pass's record"
        assert _as_full(wd, "side").hash == seen.hash


def test_many_goals_changed_at_once_are_spliced_in_order(wd: Paths) -> None:
    """Seventy of 200 goals rewritten or added between the others (past the few put in one
    by one): the spliced world is still the full pass's, item for item."""
    goals_dir(wd)
    for i in range(N, 200):
        (wd.goals / f"goal-{i:03}.md").write_text(f"# Goal {i}\n")
    settle(*wd.goals.iterdir(), wd.goals)
    _recorded(wd)
    for i in range(0, 200, 4):
        (wd.goals / f"goal-{i:03}.md").write_text(f"# Goal {i}, rewritten\n")
    for i in range(20):
        (wd.goals / f"goal-{i:03}b.md").write_text(f"# Goal {i}b, new\n")
    _settle_new(wd)
    seen = _as_full(wd)
    assert len(seen.goals) == 200 + 1 + 20


def test_a_damaged_or_forged_record_falls_back_to_the_full_pass(wd: Paths) -> None:
    goals_dir(wd)
    _recorded(wd)
    good = wd.goals_seen.read_bytes()
    (wd.goals / "goal-005.md").write_text("# Goal 5\n\nrewritten\n")
    settle(wd.goals / "goal-005.md", wd.goals)
    for how in (*DAMAGE, "the framing cut short, checksum and all"):
        wd.goals_seen.write_bytes(good)
        if how == "the framing cut short, checksum and all":
            _, line, seal_line, rest = good[: -len(digest(b""))].split(b"\n", 3)
            meta, _, section = rest.partition(b"\n")
            _write_whole(wd, line, seal_line, meta, section[:-1])
        else:
            _damage(wd, how)
        whole = how.startswith("another")  # whole, written for another listing
        _as_full(wd, "splice" if whole else "full")


def test_a_record_from_another_work_dir_vouches_for_no_goal(wd: Paths, tmp_path: Path) -> None:
    """Another work dir's record (the same names, the same sizes, other bytes): no goal
    there has this one's inode, so none is taken from it (the full pass, with the goal
    cache), and the world is this dir's."""
    goals_dir(wd)
    other = Paths(tmp_path / "other")
    shutil.copytree(wd.root, other.root, symlinks=True)
    for goal in other.goals.glob("goal-*.md"):
        goal.write_bytes(goal.read_bytes().replace(b"tidy", b"TIDY"))
    settle(*other.goals.iterdir(), other.goals)
    _recorded(other)
    _recorded(wd)
    shutil.copy(other.goals_seen, wd.goals_seen)
    seen = _as_full(wd, "full")
    assert not any(b"TIDY" in g.body for g in seen.goals)


def test_a_goal_changed_between_the_listing_and_its_read_is_not_vouched(wd: Paths) -> None:
    """Read at another stamp than the listing's: the world holds the bytes read, and neither
    the record nor the seal vouches for the listing (the few goals read are compared)."""
    goals_dir(wd)
    _recorded(wd)
    goal = wd.goals / "goal-006.md"
    goal.write_text("# Goal 6\n\nthe first edit\n")
    settle(goal, wd.goals)
    w = open_wd(wd)
    with w.memo.scope():
        goals.goal_stamps(w)  # listed now
        goal.write_text("# Goal 6\n\nthe second edit, after the listing\n")
        seen = sense(w, time.time(), persist=False)
        assert goals.spliced(w) is not None
        assert not goals.may_remember(w, seen.goals)
        assert goals.for_seal(w)(seen.goals) is None
    assert seen.items["goal:goal-006"] == digest(goal.read_bytes())
    with w.memo.scope():  # the same, listed after the edit: vouched
        seen = sense(w, time.time(), persist=False)
        assert goals.spliced(w) is not None
        assert goals.for_seal(w)(seen.goals) is not None


def test_goals_near_the_total_cap_take_the_full_pass_and_its_refusals(wd: Paths) -> None:
    """Recorded under the 16 MiB cap; then goals added past it: the splice could not know
    which kept goal the cap now refuses, so the beat reads as the full pass does, and the
    goals over the cap are refused alike."""
    goals_dir(wd)
    big = b"# Big\n" + b"x" * 900_000 + b"\n"
    for i in range(15):
        (wd.goals / f"big-{i:02}.md").write_bytes(big)
    settle(*wd.goals.glob("big-*.md"), wd.goals)
    _recorded(wd)
    for i in range(15, 20):
        (wd.goals / f"big-{i:02}.md").write_bytes(big)
    _settle_new(wd)
    seen = _as_full(wd, "full", disk=False)
    over = [g.id for g in seen.goals if g.error and "cap" in g.error]
    assert over, "no goal went over the total cap"


# -- the happy day ---------------------------------------------------------------------------


SPLICE_BEAT = (
    COUNTING
    + """
from looop_py.workdir import goalsplice
real_kept = goalsplice.kept_goals
def kept(*a, **k):
    made = real_kept(*a, **k)
    built.extend(["kept"] * len(made))
    return made
goalsplice.kept_goals = kept
result = pulse.beat(wd, force=True)
print(json.dumps({"outcome": result.outcome.value, "opens": opens,
                  "cache": built.count("cache"), "init": built.count(1),
                  "kept": built.count("kept")}))
"""
)


def test_a_beat_after_one_goal_changed_reads_that_goal_alone(wd: Paths) -> None:
    """Counted in a fresh interpreter: one goal rewritten since the record, a forced beat
    opens that goal once (and the fenced one the rules decider reads), loads no goal cache,
    builds one GoalFile by reading and the others from the record, as the recorded path
    builds them (N + 1 in all)."""
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    goals_dir(wd)
    _recorded(wd)
    pulse.beat(open_wd(wd), force=True)  # the loop index and caches settle
    (wd.goals / "goal-004.md").write_text("# Goal 4\n\nrewritten, longer than it was\n")
    found = counted(wd.root, SPLICE_BEAT)
    assert found["outcome"] == "decided"
    opened = {k: n for k, n in found["opens"].items() if k.startswith("goals/")}
    assert opened == {"goals/goal-004.md": 1, "goals/fenced.md": 1}
    assert "state/goals-cache.json" not in found["opens"]
    assert found["cache"] == 0, "the goal cache was loaded"
    assert (found["init"], found["kept"]) == (1, N), "one goal read, the rest from the record"
    assert found["opens"].get("state/goals-seen.bin") == 1


def test_the_spliced_world_is_the_full_pass_world(wd: Paths) -> None:
    goals_dir(wd)
    wd.playbook.write_text("# Playbook\n\nbe kind\n")
    _recorded(wd)
    (wd.goals / "fenced.md").write_text("---\non: [s0]\nruntime: shell\n---\n# Fenced, edited\n")
    seen = _as_full(wd)
    assert next(g for g in seen.goals if g.id == "fenced").text().endswith("edited\n")
    committed = json.loads(wd.last_world.read_text())
    assert committed["items"]["goal:fenced"] != seen.items["goal:fenced"]
