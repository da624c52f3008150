"""state/goals-seen.bin (workdir/goalside.py): a full beat whose listing of goals/ is the one
recorded takes the goal side of the world from it. Nothing it says may hide an edit, an
added, removed, renamed or linked goal, or change the world's items or hash; a damaged or
forged file is never trusted over the listing."""

from __future__ import annotations

import json
import os
import shutil
import time

from looop_py import world
from looop_py.beat import pulse
from looop_py.sensing.sense import World, sense
from looop_py.workdir import goalcache, goals, goalside
from looop_py.workdir.goalfile import CHANGED_SINCE
from looop_py.workdir.paths import Paths
from looop_py.world import digest, hashes
from tests.conftest import open_wd
from tests.edits import goals_dir, settle
from tests.opens import counted

N = 40


def _recorded(wd: Paths) -> None:
    """A beat that records the goal side, checked to have done so."""
    pulse.beat(open_wd(wd), force=True)
    assert wd.goals_seen.exists(), "a settled listing is recorded"


def _taken(wd: Paths) -> tuple[World, str]:
    """SENSE in a beat's scope: the world, and how it took the goal side ("side": the
    listing is the recorded one; "splice": from the record and the goals read; "full")."""
    w = open_wd(wd)
    with w.memo.scope():
        seen = sense(w, time.time(), persist=False)
        how = "side" if goals.side(w) else "splice" if goals.spliced(w) else "full"
        return seen, how


def _sensed(wd: Paths) -> tuple[World, bool]:
    """SENSE in a beat's scope: the world, and whether it came from the recorded side."""
    seen, how = _taken(wd)
    return seen, how == "side"


def _full_pass(wd: Paths) -> World:
    """SENSE with no recorded side (moved away and put back): the full pass's world."""
    kept = wd.goals_seen.with_suffix(".kept")
    if wd.goals_seen.exists():
        shutil.move(wd.goals_seen, kept)
    try:
        seen, how = _taken(wd)
        assert how == "full"
        return seen
    finally:
        if kept.exists():
            shutil.move(kept, wd.goals_seen)


def _same_world(a: World, b: World) -> None:
    assert list(a.items.items()) == list(b.items.items())  # the same items, in the same order
    assert (a.hash, a.policy) == (b.hash, b.policy) == hashes(a.items)
    assert [(g.id, g.stamp, g.digest, g.fenced, g.error) for g in a.goals] == [
        (g.id, g.stamp, g.digest, g.fenced, g.error) for g in b.goals
    ]
    assert a.snapshots == b.snapshots


def _on_disk(wd: Paths, seen: World) -> None:
    """Each goal item is the digest of the bytes on disk now."""
    on_disk = {f"goal:{p.stem}": digest(p.read_bytes()) for p in wd.goals.glob("*.md")}
    assert {k: v for k, v in seen.items.items() if k.startswith("goal:")} == on_disk


# -- rainy days first ------------------------------------------------------------------------


def test_a_goal_rewritten_in_place_within_the_racy_window_is_not_recorded(wd: Paths) -> None:
    """Written just now: a second write in the same clock tick could keep size, mtime and
    ctime, so a listing that holds it is never recorded, and the rewrite is read."""
    goals_dir(wd)
    goal = wd.goals / "goal-007.md"
    goal.write_text("# Goal 7\n\nthe first text.\n")
    pulse.beat(open_wd(wd), force=True)
    if time.time_ns() - goal.stat().st_ctime_ns < goalcache.RACY_NS:
        assert not wd.goals_seen.exists(), "an unsettled listing was recorded"
    st = goal.stat()
    with goal.open("r+b") as f:
        f.write(b"# Goal 7\n\nthe EDIT  text.\n"[: st.st_size])
    os.utime(goal, ns=(st.st_atime_ns, st.st_mtime_ns))
    seen, _ = _sensed(wd)
    assert seen.items["goal:goal-007"] == digest(goal.read_bytes())
    _on_disk(wd, seen)


def test_a_listing_with_a_goal_inside_the_racy_window_is_never_recorded(wd: Paths) -> None:
    """A goal's mtime at the listing's own tick (set ahead, so the test never races the
    clock): a second write in that tick could keep its whole stat, so no beat records it."""
    goals_dir(wd)
    goal = wd.goals / "goal-004.md"
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(goal, ns=(ahead, ahead))
    w = open_wd(wd)
    with w.memo.scope():
        assert goals._listed(w).side is False, "an unsettled listing may be recorded"
    pulse.beat(open_wd(wd), force=True)
    assert not wd.goals_seen.exists()
    seen, from_side = _sensed(wd)
    assert not from_side
    _on_disk(wd, seen)


def test_an_edit_in_place_that_keeps_size_and_mtime_misses_the_side(wd: Paths) -> None:
    goals_dir(wd)
    _recorded(wd)
    goal = wd.goals / "goal-003.md"
    st = goal.stat()
    with goal.open("r+b") as f:
        f.write(b"# Goal 3\n\nKEEP thing 3 TIDY.\n"[: st.st_size])
    os.utime(goal, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert goal.stat().st_size == st.st_size and goal.stat().st_mtime_ns == st.st_mtime_ns
    seen, from_side = _sensed(wd)
    assert not from_side, "only the ctime moved, and the listing holds it"
    _on_disk(wd, seen)
    _same_world(seen, _full_pass(wd))


def test_a_goal_replaced_by_a_symlink_or_a_hard_link_is_read(wd: Paths) -> None:
    goals_dir(wd)
    _recorded(wd)
    (wd.root / "notes").mkdir()
    target = wd.root / "notes" / "linked.md"
    target.write_text("# Goal 1\n\nKeep thing 1 tidy.\n")  # the same bytes: only the kind differs
    (wd.goals / "goal-001.md").unlink()
    (wd.goals / "goal-001.md").symlink_to(target)
    settle(wd.goals / "goal-001.md", wd.goals)
    seen, from_side = _sensed(wd)
    assert not from_side, "a listing with a link is never the recorded one"
    pulse.beat(open_wd(wd), force=True)
    seen, from_side = _sensed(wd)
    assert not from_side, "nor is one with a link recorded"
    _on_disk(wd, seen)

    (wd.goals / "goal-001.md").unlink()
    os.link(wd.goals / "goal-002.md", wd.goals / "goal-001.md")  # one inode, two goals
    settle(wd.goals / "goal-001.md", wd.goals)
    _recorded(wd)
    seen, from_side = _sensed(wd)
    assert from_side
    _on_disk(wd, seen)
    (wd.goals / "goal-002.md").write_text("# Goal 2, edited through its other name\n")
    seen, from_side = _sensed(wd)
    assert not from_side, "the shared inode's stat moved under both names"
    assert seen.items["goal:goal-001"] == seen.items["goal:goal-002"]
    _on_disk(wd, seen)


def test_a_goal_added_removed_or_renamed_between_two_full_beats_is_seen(wd: Paths) -> None:
    goals_dir(wd)
    for change in ("add", "remove", "rename"):
        _recorded(wd)
        if change == "add":
            (wd.goals / "new.md").write_text("# New\n")
        elif change == "remove":
            (wd.goals / "goal-010.md").unlink()
        else:
            (wd.goals / "goal-020.md").rename(wd.goals / "goal-999.md")
        settle(*wd.goals.iterdir(), wd.goals)
        seen, from_side = _sensed(wd)
        assert not from_side, change
        _on_disk(wd, seen)
        _same_world(seen, _full_pass(wd))
    assert "goal:goal-999" in seen.items and "goal:goal-020" not in seen.items


def test_an_unsafe_name_or_a_link_out_of_the_work_dir_is_refused_as_before(wd: Paths) -> None:
    goals_dir(wd)
    _recorded(wd)
    outside = wd.root.parent / "outside.md"
    outside.write_text("# Outside\n")
    (wd.goals / "out.md").symlink_to(outside)
    (wd.goals / "bad name.md").write_text("# Unsafe\n")
    settle(wd.goals / "out.md", wd.goals / "bad name.md", wd.goals)
    seen, from_side = _sensed(wd)
    assert not from_side
    out = next(g for g in seen.goals if g.id == "out")
    assert out.error is not None and "outside the work dir" in out.error
    assert "goal:bad name" not in seen.items
    pulse.beat(open_wd(wd), force=True)
    assert goals.goal_paths(open_wd(wd)) != [], "the goals still list"
    seen, from_side = _sensed(wd)
    assert not from_side, "a listing with a refusal is never recorded"


def _damage(wd: Paths, how: str) -> None:
    data = wd.goals_seen.read_bytes()
    # MAGIC, the listing's key, its record, the JSON, the framing, then the digest of all that
    _, line, seal_line, rest = data[: -len(digest(b""))].split(b"\n", 3)
    meta_raw, _, section = rest.partition(b"\n")
    meta = json.loads(meta_raw)
    if how == "truncated":
        wd.goals_seen.write_bytes(data[: len(data) // 2])
    elif how == "a byte flipped":
        i = len(data) * 3 // 4
        wd.goals_seen.write_bytes(data[:i] + bytes([data[i] ^ 0x20]) + data[i + 1 :])
    elif how == "empty":
        wd.goals_seen.write_bytes(b"")
    elif how == "not this format":
        wd.goals_seen.write_bytes(b'{"v": 1, "goals": {}}\n')
    elif how == "another listing, checksum and all":  # an old file, a copy from elsewhere
        _write_whole(wd, line.replace(b" k ", b" k 9"), seal_line, meta_raw, section)
    elif how == "another version, checksum and all":  # the key line of version 3: a record
        _write_whole(wd, line.split(b" k ")[0] + b" " + seal_line, seal_line, meta_raw, section)
    elif how == "no seal line, checksum and all":
        _write_whole(wd, line, b"k 1 1 " + seal_line, meta_raw, section)
    elif how == "a shape that does not fit, checksum and all":
        meta["ids"] = meta["ids"][:-1]
        _write_whole(wd, line, seal_line, json.dumps(meta).encode(), section)
    elif how == "not JSON, checksum and all":
        _write_whole(wd, line, seal_line, b"{not json", section)
    elif how == "the digest alone":
        wd.goals_seen.write_bytes(digest(b"").encode())


def _write_whole(wd: Paths, line: bytes, seal_line: bytes, meta: bytes, section: bytes) -> None:
    body = goalside.MAGIC + b"\n" + line + b"\n" + seal_line + b"\n" + meta + b"\n" + section
    wd.goals_seen.write_bytes(body + digest(body).encode())


DAMAGE = (
    "truncated",
    "a byte flipped",
    "empty",
    "not this format",
    "another listing, checksum and all",
    "another version, checksum and all",
    "no seal line, checksum and all",
    "a shape that does not fit, checksum and all",
    "not JSON, checksum and all",
    "the digest alone",
)


def test_a_damaged_or_forged_record_falls_back_to_the_full_pass(wd: Paths) -> None:
    goals_dir(wd)
    _recorded(wd)
    good = wd.goals_seen.read_bytes()
    whole, from_side = _sensed(wd)
    assert from_side
    for how in DAMAGE:
        wd.goals_seen.write_bytes(good)
        _damage(wd, how)
        seen, from_side = _sensed(wd)
        assert not from_side, how
        _same_world(seen, whole)
        result = pulse.beat(open_wd(wd), force=True)
        assert result.outcome.value == "decided", (how, result.reason)
        assert wd.goals_seen.read_bytes() == good, f"{how}: written afresh by the full pass"
    assert not (wd.state / "errors.log").exists(), "nothing scary was journaled"
    assert not list(wd.root.glob("**/errors.log"))


def test_a_crash_between_the_world_and_the_record_leaves_the_next_beat_right(wd: Paths) -> None:
    """Either order: a stale record (the goals changed since) is another listing; a fresh
    record beside a stale committed world still gives the goals as they are, and the diff
    against the stale world decides."""
    goals_dir(wd)
    _recorded(wd)
    stale_record = wd.goals_seen.read_bytes()
    stale_world = wd.last_world.read_bytes()
    (wd.goals / "goal-005.md").write_text("# Goal 5\n\nrewritten\n")
    settle(wd.goals / "goal-005.md", wd.goals)
    _recorded(wd)
    wd.goals_seen.write_bytes(stale_record)  # the world written, then a crash
    seen, from_side = _sensed(wd)
    assert not from_side
    _on_disk(wd, seen)
    _recorded(wd)  # the record written, the world not (put back)
    wd.last_world.write_bytes(stale_world)
    seen, from_side = _sensed(wd)
    assert from_side
    _on_disk(wd, seen)
    assert json.loads(stale_world)["items"]["goal:goal-005"] != seen.items["goal:goal-005"]
    result = pulse.beat(open_wd(wd))  # not forced: the diff alone decides
    assert result.outcome.value == "decided", result.reason


def test_a_goal_edited_after_sense_took_it_from_the_side_reads_as_changed(wd: Paths) -> None:
    """The rules decider reads a fenced goal after SENSE: bytes not the ones hashed read as
    the notice, never as a trigger, and the next beat sees the edit."""
    goals_dir(wd)
    _recorded(wd)
    seen, from_side = _sensed(wd)
    assert from_side
    fenced = next(g for g in seen.goals if g.id == "fenced")
    assert fenced.fenced and not fenced.held
    (wd.goals / "fenced.md").write_text("---\non: [s0]\nruntime: shell\n---\n# Edited\n")
    assert CHANGED_SINCE.encode() in fenced.body
    seen, from_side = _sensed(wd)
    assert not from_side
    _on_disk(wd, seen)


# -- the happy day ---------------------------------------------------------------------------


def test_hashing_the_goal_items_framed_is_hashing_them() -> None:
    """`hashes_framed` with the goals framed once equals `hashes` of the whole map, with
    near-miss keys, no playbook, no goals and no snapshots."""
    goal_items = {f"goal:{k}": f"xxh3:{i:032x}" for i, k in enumerate(["a", "a-b", "b", "goals"])}
    heads: list[dict[str, str]] = [{}, {"playbook": "xxh3:" + "1" * 32}]
    tails: list[dict[str, str]] = [{}, {"snap:goal:y": "{}", "snap:s": '{"n":1}', "snap:": ""}]
    for head in heads:
        for goals_part in ({}, goal_items):
            for tail in tails:
                whole = {**head, **goals_part, **tail}
                assert world.hashes_framed(head, world.framed(goals_part), tail) == hashes(whole)


def test_the_world_from_the_side_is_the_world_of_the_full_pass(wd: Paths) -> None:
    goals_dir(wd)
    wd.playbook.write_text("# Playbook\n\nbe kind\n")
    _recorded(wd)
    seen, from_side = _sensed(wd)
    assert from_side
    _same_world(seen, _full_pass(wd))
    _on_disk(wd, seen)
    assert next(g for g in seen.goals if g.id == "fenced").text().startswith("---")


# A beat counted in a fresh interpreter (tests/opens.py `counted`): every GoalFile built by
# its constructor (1) and every load of the goal cache ("cache") go into `built`.
COUNTING = """
from looop_py.beat import pulse
from looop_py.workdir import goalcache, goalfile, goals
built = []
real_init, real_load = goalfile.GoalFile.__init__, goalcache.load
def init(self, *a, **k):
    built.append(1)
    real_init(self, *a, **k)
goalfile.GoalFile.__init__ = init
goalcache.load = lambda wd: built.append("cache") or real_load(wd)
"""

SIDE_BEAT = (
    COUNTING
    + """
real_known = goals._known
def known(folder, side):
    made = real_known(folder, side)
    built.extend(["known"] * len(made))
    return made
goals._known = known
from looop_py.workdir import listing
real_record = listing.Seen.record
listing.Seen.record = lambda self: built.append("sorted") or real_record(self)
real_for_seal = listing.for_seal
def for_seal(*a, known=(), **k):
    built.append("own" if known and known == a[3] else "other")
    return real_for_seal(*a, known=known, **k)
listing.for_seal = for_seal
result = pulse.beat(wd, force=True)
print(json.dumps({"outcome": result.outcome.value, "opens": opens,
                  "cache": built.count("cache"), "init": built.count(1),
                  "known": built.count("known"), "sorted": built.count("sorted"),
                  "seal": [b for b in built if b in ("own", "other")]}))
"""
)


def test_a_full_beat_on_the_recorded_side_opens_no_goal_and_no_goal_cache(wd: Paths) -> None:
    """Counted in a fresh interpreter: with goals/ as recorded, a forced beat opens no plain
    goal (at most the fenced one, which the rules decider reads), loads no goal cache, and
    builds one GoalFile per goal, once, from the recorded side, and never sorts the listing
    (its key, in listdir's order, is compared; the sorted `g goals` line is the recorded one)."""
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    goals_dir(wd)
    _recorded(wd)
    pulse.beat(open_wd(wd), force=True)  # the loop index and caches settle
    found = counted(wd.root, SIDE_BEAT)
    assert found["outcome"] == "decided"
    opened = {k: n for k, n in found["opens"].items() if k.startswith("goals/")}
    assert opened == {"goals/fenced.md": 1}, "a plain goal was opened, or the fenced one twice"
    assert "state/goals-cache.json" not in found["opens"]
    assert found["cache"] == 0, "the goal cache was loaded"
    assert (found["init"], found["known"]) == (0, N + 1), "one GoalFile per goal, from the side"
    assert found["opens"].get("state/goals-seen.bin") == 1
    assert found["sorted"] == 0, "the listing was sorted though goals/ is as recorded"
    assert found["seal"] == ["own"], "the seal compared the side's own goals one by one"


def test_goals_moved_out_of_the_work_dir_and_linked_back_are_refused(wd: Paths) -> None:
    """The same folder, the same entries, the same stats, reached through a link out of
    the work dir: the record's listing does not vouch for it (goals/ is lstat'ed), and
    every goal is refused as the full pass refuses it."""
    goals_dir(wd)
    _recorded(wd)
    away = wd.root.parent / "goals-away"
    wd.goals.rename(away)
    wd.goals.symlink_to(away)
    settle(wd.goals)
    seen, from_side = _sensed(wd)
    assert not from_side
    _same_world(seen, _full_pass(wd))
    assert all(g.error and "outside the work dir" in g.error for g in seen.goals) and seen.goals
