"""state/goals-cache.json: a goal whose full stat is the one a beat read it at is not opened
again; nothing the cache says may hide an edit or change the world's hash."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from looop_py.beat import pulse
from looop_py.beat.decide import gather_prompt
from looop_py.sensing.sense import sense
from looop_py.workdir import goalcache
from looop_py.workdir.goalfile import CHANGED_SINCE
from looop_py.workdir.paths import Paths
from looop_py.world import digest
from tests.conftest import open_wd, wait_for, write_sensor
from tests.opens import counted


def _fixed_work_dir(wd: Paths) -> None:
    """Goals with and without frontmatter, one not UTF-8, one empty, one linked, and the
    times put back a day so that each goal is older than the cache's racy window."""
    write_sensor(wd, "s0", 'echo \'{"signal": {"n": 0}, "detail": {"x": 1}}\'\n')
    for g in wd.goals.glob("*.md"):
        g.unlink()
    for i in range(6):
        (wd.goals / f"goal-{i}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    (wd.goals / "fenced.md").write_text("---\non: [s0]\nruntime: shell\n---\n# Fenced\n")
    (wd.goals / "latin.md").write_bytes(b"# caf\xe9\n")
    (wd.goals / "empty.md").write_bytes(b"")
    (wd.root / "notes").mkdir()
    (wd.root / "notes" / "linked.md").write_text("# Linked inside the work dir\n")
    (wd.goals / "linked.md").symlink_to(wd.root / "notes" / "linked.md")
    (wd.root / "PLAYBOOK.md").write_text("# Playbook\n\nBe careful.\n")
    day_ago = time.time() - 86400
    for path in [*wd.goals.iterdir(), wd.root / "notes" / "linked.md"]:
        os.utime(path, (day_ago, day_ago), follow_symlinks=False)
    _settled(wd.root / "notes" / "linked.md")


def _world_hash(wd: Paths) -> str:
    return sense(open_wd(wd, clock=lambda: 1_700_000_000.0), 1_700_000_000.0).hash


def test_the_world_hash_of_a_fixed_work_dir_is_what_it_was_before_the_cache(wd: Paths) -> None:
    _fixed_work_dir(wd)
    cold = _world_hash(wd)
    assert cold == PINNED, cold
    pulse.beat(open_wd(wd), force=True)  # the beat fills the cache
    assert _world_hash(wd) == PINNED


PINNED = "xxh3:d082782346a849c09affa435b399b3ac"


# -- rainy days: nothing the cache says hides an edit ---------------------------------------


def _day_old(path: Path) -> None:
    """Its mtime a day back; its ctime (which no one sets) past the cache's racy window."""
    day_ago = time.time() - 86400
    os.utime(path, (day_ago, day_ago))
    _settled(path)


def _settled(path: Path) -> None:
    ctime = path.stat().st_ctime_ns
    wait_for(lambda: time.time_ns() - ctime > goalcache.RACY_NS, what="the racy window")


def _cached(wd: Paths) -> dict[str, str]:
    """The cache's entries; none when no goal was old enough to be written down."""
    if not wd.goals_cache.exists():
        return {}
    return json.loads(wd.goals_cache.read_bytes())["goals"]


def test_an_edit_in_place_that_keeps_size_and_mtime_misses_the_cache(wd: Paths) -> None:
    """Same size, the mtime put back: only the ctime says the goal changed, and the cache
    is keyed by it, so the new bytes are read and hashed."""
    goal = wd.goals / "tidy.md"
    goal.write_text("# Tidy\n\nthe first text\n")
    _day_old(goal)
    pulse.beat(open_wd(wd), force=True)
    assert "tidy" in _cached(wd), "an old enough goal is cached"
    before = sense(open_wd(wd), time.time()).items["goal:tidy"]
    st = goal.stat()
    with goal.open("r+b") as f:
        f.write(b"# Tidy\n\nthe EDIT  text\n"[: st.st_size])
    os.utime(goal, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert goal.stat().st_size == st.st_size and goal.stat().st_mtime_ns == st.st_mtime_ns
    after = sense(open_wd(wd), time.time())
    assert after.items["goal:tidy"] == digest(goal.read_bytes()) != before


def test_a_goal_changed_within_the_racy_window_is_not_trusted() -> None:
    """A second write in the same tick of the file system's clock keeps the stat: a goal
    whose times are that close to its read is read again next beat."""
    now = 1_700_000_000 * 10**9
    stamp = "5.10.{m}.{c}.33188"
    old = now - goalcache.RACY_NS
    assert goalcache.trusted(stamp.format(m=old, c=old), now)
    assert not goalcache.trusted(stamp.format(m=old, c=now - 1), now)
    assert not goalcache.trusted(stamp.format(m=now, c=old), now)
    assert not goalcache.trusted("not a stamp", now)


def test_a_goal_written_just_now_is_read_again_by_the_next_beat(wd: Paths) -> None:
    (wd.goals / "fresh.md").write_text("# Fresh\n")
    pulse.beat(open_wd(wd), force=True)
    if time.time_ns() - (wd.goals / "fresh.md").stat().st_ctime_ns < goalcache.RACY_NS:
        assert _cached(wd)["fresh"].endswith(" racy"), "listed, and marked: never a hit"
        known = goalcache.load(open_wd(wd))
        stamp = _cached(wd)["fresh"].split(" ")[0]
        assert known.known([("fresh", stamp)]) == {}


def _split_hit(entry: str | None, stamp: str) -> tuple[str, bool] | None:
    """The cache's test as it was written before `known` (split on spaces), for comparison."""
    parts = (entry or "").split(" ")
    if len(parts) != 3 or parts[0] != stamp or parts[2] not in ("0", "1"):
        return None
    if len(parts[1]) != 32 or not set(parts[1]) <= set("0123456789abcdef"):
        return None
    return "xxh3:" + parts[1], parts[2] == "1"


def test_only_a_whole_well_formed_entry_for_the_very_stamp_is_a_hit(wd: Paths) -> None:
    """Hostile and near-miss entries: a racy mark, a stamp that is a prefix of another,
    upper-case or short hex, a third flag, doubled spaces, a missing stamp."""
    hexd = "0123456789abcdef" * 2
    stamp = "12.34.56.78.33188"
    entries = {
        "ok": f"{stamp} {hexd} 0",
        "fenced": f"{stamp} {hexd} 1",
        "racy": f"{stamp} {hexd} 0 racy",
        "longer-stamp": f"{stamp}9 {hexd} 0",
        "shorter-stamp": f"{stamp[:-1]} {hexd} 0",
        "upper": f"{stamp} {hexd.upper()} 0",
        "short-hex": f"{stamp} {hexd[:-1]} 0",
        "long-hex": f"{stamp} {hexd}a 0",
        "flag": f"{stamp} {hexd} 2",
        "spaces": f"{stamp}  {hexd[1:]} 0",
        "trailing": f"{stamp} {hexd} 0 ",
        "not-hex": f"{stamp} {hexd[:-1]}g 0",
        "no-stamp": f"{stamp} {hexd} 0",
    }
    cache = goalcache.GoalCache(open_wd(wd), dict(entries))
    found = [(g, None if g == "no-stamp" else stamp) for g in [*entries, "absent"]]
    expected = {
        g: hit for g, s in found if s is not None and (hit := _split_hit(entries.get(g), s))
    }
    assert cache.known(found) == expected
    assert set(expected) == {"ok", "fenced"} and expected["fenced"][1] is True


@pytest.mark.parametrize(
    "damage",
    [
        b"not json at all",
        b"[1, 2, 3]",
        b'{"v": 999, "goals": {}}',
        b'{"v": 1, "goals": [1, 2]}',
        b'{"v": 1, "goals": {"goal-0": 7, "goal-1": ["x"], "goal-2": "a b", "goal-3": "a b c d"}}',
        b'{"v": 1, "goals": {"goal-4": "STAMP not-a-digest-but-32-characters!! 1"}}',
        b"[" * 5000,
    ],
)
def test_a_damaged_or_foreign_cache_is_ignored_and_written_afresh(wd: Paths, damage: bytes) -> None:
    _fixed_work_dir(wd)
    wd.state.mkdir(exist_ok=True)
    st = (wd.goals / "goal-4.md").stat()
    stamp = f"{st.st_ino}.{st.st_size}.{st.st_mtime_ns}.{st.st_ctime_ns}.{st.st_mode}"
    wd.goals_cache.write_bytes(damage.replace(b"STAMP", stamp.encode()))
    assert _world_hash(wd) == PINNED
    pulse.beat(open_wd(wd), force=True)
    cached = _cached(wd)
    assert set(cached) >= {f"goal-{i}" for i in range(6)}
    assert all(len(v.split(" ")) == 3 for v in cached.values())
    assert _world_hash(wd) == PINNED


def test_a_lying_entry_with_an_old_stat_does_not_stand_for_the_goal(wd: Paths) -> None:
    """An entry written for the goal's stat before an edit (a cache copied back, or left
    from a rename) names a stat the file no longer has."""
    goal = wd.goals / "tidy.md"
    goal.write_text("# Tidy\n\nversion one\n")
    _day_old(goal)
    pulse.beat(open_wd(wd), force=True)
    stale = wd.goals_cache.read_bytes()
    goal.write_text("# Tidy\n\nversion two\n")
    _day_old(goal)
    wd.goals_cache.write_bytes(stale)
    seen = sense(open_wd(wd), time.time())
    assert seen.items["goal:tidy"] == digest(b"# Tidy\n\nversion two\n")


def test_a_goal_known_by_its_stat_and_edited_after_sense_shows_no_unhashed_text(
    wd: Paths,
) -> None:
    """The prompt reads a cached goal when it shows it: bytes that are not the hashed ones
    read as a notice, and the next beat sees the edit."""
    goal = wd.goals / "tidy.md"
    goal.write_text("# Tidy\n\nthe version that was hashed\n")
    _day_old(goal)
    pulse.beat(open_wd(wd), force=True)
    seen = sense(open_wd(wd), time.time())
    tidy = next(g for g in seen.goals if g.id == "tidy")
    assert not tidy.held, "known by its stat: not read by SENSE"
    goal.write_text("# Tidy\n\nan edit made after SENSE\n")
    text = gather_prompt(
        open_wd(wd),
        now=time.time(),
        seen=seen,
        changed=(),
        forced_by="force",
        flapping=[],
        last_failure=None,
    )
    assert "an edit made after SENSE" not in text
    assert CHANGED_SINCE in text
    assert sense(open_wd(wd), time.time()).items["goal:tidy"] != seen.items["goal:tidy"]


# -- counted: what a full beat opens ---------------------------------------------------------

OPENS = """
from looop_py.beat import pulse
result = pulse.beat(wd, force=True)
goals = sorted(k for k in opens if k.startswith("goals/"))
print(json.dumps({"outcome": result.outcome.value, "goals": goals,
                  "most": max([opens[k] for k in goals] or [0])}))
"""


def test_a_full_beat_opens_only_the_goals_its_prompt_shows(wd: Paths) -> None:
    """200 goals, a 16 KiB prompt: once the cache knows them, a forced beat opens a goal
    only to show it (each once): those the prompt holds, and the one that did not fit."""
    for g in wd.goals.glob("*.md"):
        g.unlink()
    day_ago = time.time() - 86400
    for i in range(200):
        (wd.goals / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\n" + "Keep it tidy. " * 8)
        os.utime(wd.goals / f"goal-{i:03}.md", (day_ago, day_ago))
    _settled(wd.goals / "goal-199.md")
    (wd.root / "moves.json").write_text(json.dumps([{"action": "noop"}] * 3))
    wd.config.write_text(  # a backend that reads the prompt (rules reads none: no goal opened)
        '[decider]\nbackend = "script"\nscript = "moves.json"\n[limits]\nprompt_max_bytes = 16384\n'
    )
    first = counted(wd.root, OPENS)
    assert first["outcome"] == "decided" and len(first["goals"]) == 200  # a cold cache
    again = counted(wd.root, OPENS)
    assert again["outcome"] == "decided" and again["most"] == 1
    prompt = max(wd.runs.glob("*/prompt.md")).read_text()
    shown = {line[10:-3] for line in prompt.splitlines() if line.startswith("--- goals/")}
    assert 0 < len(shown) < 200
    opened = {k[6:-3] for k in again["goals"]}
    assert len(opened - shown) <= 1 and len(opened) <= len(shown) + 1, opened - shown
