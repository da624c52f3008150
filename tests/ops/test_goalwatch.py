"""ops/goalwatch.py: inotify vouches for goals/ only while it saw no change there.

Real inotify on real folders. The truth is the survey's own line for goals/
(`survey.goals_line`, one lstat a goal): whatever the watch gives must be that line,
or None (no vouching: the survey lists goals/ itself). Rainy days first.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from looop_py.ops import inotify
from looop_py.ops.goalwatch import GoalWatch, local
from looop_py.sensing import survey
from looop_py.world import stat_text
from tests.edits import edit_in_place


def _goals(root: Path, n: int = 30) -> Path:
    folder = root / "goals"
    folder.mkdir(exist_ok=True)
    for i in range(n):
        (folder / f"goal-{i:03}.md").write_text(f"# Goal {i}\n")
    return folder


def _current(watch: GoalWatch, folder: Path) -> str:
    """The watch's line, which must be the survey's line for goals/ as it is now."""
    got = watch.listed()
    assert got is not None, "the watch should vouch here"
    assert got[0] == stat_text(os.lstat(folder)), "listed under goals/'s current stat"
    line = survey.goals_line(str(folder))
    assert got[1] == line, "the watch vouched for a listing that is no longer true"
    return line


@pytest.fixture
def watch(tmp_path: Path) -> GoalWatch:
    found = GoalWatch(str(tmp_path / "goals"))
    yield found  # type: ignore[misc]
    found.close()


# -- what it must not vouch for -----------------------------------------------------


def test_an_edit_in_place_keeping_size_and_mtime_is_seen(tmp_path: Path, watch: GoalWatch) -> None:
    folder = _goals(tmp_path)
    before = _current(watch, folder)
    listings = watch.listings
    edit_in_place(folder / "goal-007.md", "# Goal X\n")
    assert _current(watch, folder) != before
    assert (watch.listings, watch.restats) == (listings, 1)  # that goal lstat'ed again


def test_changed_says_once_that_goals_changed_and_the_next_listing_sees_it(
    tmp_path: Path, watch: GoalWatch
) -> None:
    folder = _goals(tmp_path)
    assert not watch.changed()  # no watch yet: nothing to say
    before = _current(watch, folder)
    assert not watch.changed()
    (folder / "goal-009.md").write_text("# Goal 9, longer now\n")
    assert watch.changed()
    assert not watch.changed()  # said once: the beat it starts reads goals/ in full
    assert _current(watch, folder) != before
    assert (watch.listings, watch.restats) == (1, 1)


@pytest.mark.parametrize("edit", ["new goal", "deleted goal", "renamed in", "renamed out", "chmod"])
def test_every_change_of_an_entry_is_listed_again(
    tmp_path: Path, watch: GoalWatch, edit: str
) -> None:
    folder = _goals(tmp_path)
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# From elsewhere\n")
    before = _current(watch, folder)
    if edit == "new goal":
        (folder / "fresh.md").write_text("# Fresh\n")
    elif edit == "deleted goal":
        (folder / "goal-003.md").unlink()
    elif edit == "renamed in":
        os.rename(outside, folder / "moved.md")
    elif edit == "renamed out":
        os.rename(folder / "goal-004.md", outside.with_name("out.md"))
    else:
        os.chmod(folder / "goal-005.md", 0o600)
    assert _current(watch, folder) != before


def test_a_write_still_open_is_seen_before_the_file_is_closed(
    tmp_path: Path, watch: GoalWatch
) -> None:
    folder = _goals(tmp_path)
    before = _current(watch, folder)
    with open(folder / "goal-001.md", "a", encoding="utf-8") as f:
        f.write("more\n")
        f.flush()  # IN_MODIFY now; IN_CLOSE_WRITE only at the close
        assert _current(watch, folder) != before


def test_goals_replaced_by_another_folder_is_watched_again(
    tmp_path: Path, watch: GoalWatch
) -> None:
    folder = _goals(tmp_path)
    _current(watch, folder)
    other = tmp_path / "other"
    other.mkdir()
    (other / "only.md").write_text("# Only\n")
    os.rename(folder, tmp_path / "goals.old")
    os.rename(other, folder)
    replaced = _current(watch, folder)
    assert replaced == survey.goals_line(str(folder))
    # the old folder is no longer the one vouched for; an edit in the new one is seen
    (tmp_path / "goals.old" / "goal-001.md").write_text("# changed where nobody looks\n")
    edit_in_place(folder / "only.md", "# Onlx\n")
    assert _current(watch, folder) != replaced


def test_the_folder_above_moved_and_goals_made_anew_at_the_path(tmp_path: Path) -> None:
    """No event reaches the watch on the old goals/ (it was not itself moved): the folder
    now at the path is another inode, and that is what is watched and listed."""
    (tmp_path / "wd").mkdir()
    folder = _goals(tmp_path / "wd")
    watch = GoalWatch(str(folder))
    try:
        before = _current(watch, folder)
        os.rename(tmp_path / "wd", tmp_path / "wd.old")
        (tmp_path / "wd").mkdir()
        shutil.copytree(tmp_path / "wd.old" / "goals", folder)
        edit_in_place(folder / "goal-010.md", "# Goal QQ\n")
        assert _current(watch, folder) != before
        edit_in_place(folder / "goal-011.md", "# Goal PP\n")  # watched, the new one
        _current(watch, folder)
        assert (watch.listings, watch.restats) == (2, 1)
    finally:
        watch.close()


def test_goals_removed_then_made_again(tmp_path: Path, watch: GoalWatch) -> None:
    folder = _goals(tmp_path)
    _current(watch, folder)
    shutil.rmtree(folder)
    assert watch.listed() is None
    _goals(tmp_path, 3)
    _current(watch, folder)


def test_a_hard_linked_goal_written_through_its_other_name(
    tmp_path: Path, watch: GoalWatch
) -> None:
    folder = _goals(tmp_path)
    other = tmp_path / "twin.md"
    os.link(folder / "goal-002.md", other)  # no event in goals/ when written through `other`
    before = _current(watch, folder)
    edit_in_place(other, "# Twin 2\n")
    assert survey.goals_line(str(folder)) != before
    assert watch.listed() is None  # the linked file is stat'ed each time: no vouching now
    _current(watch, folder)  # and listed again the time after


def test_an_overflowing_event_queue_lists_again_and_the_watch_still_works(
    tmp_path: Path, watch: GoalWatch
) -> None:
    folder = _goals(tmp_path, 2)
    _current(watch, folder)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    a, b = folder / "goal-000.md", folder / "goal-001.md"
    for i in range(limit // 2 + 10):  # alternating, so the kernel merges none of them
        os.utime(a, ns=(i, i))
        os.utime(b, ns=(i, i))
    listings = watch.listings
    _current(watch, folder)
    assert watch.listings == listings + 1
    edit_in_place(a, "# Goal 9\n")
    _current(watch, folder)
    assert (watch.listings, watch.restats) == (listings + 1, 1)


def test_overflow_is_what_the_kernel_reported(tmp_path: Path) -> None:
    """The overflow above is real: the queue held more than the kernel keeps."""
    folder = _goals(tmp_path, 2)
    ino = inotify.Inotify()
    try:
        ino.add(str(folder))
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
        for i in range(limit // 2 + 10):
            os.utime(folder / "goal-000.md", ns=(i, i))
            os.utime(folder / "goal-001.md", ns=(i, i))
        assert any(e.overflow for e in ino.read())
    finally:
        ino.close()


def test_no_watch_no_vouching(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    real = _goals(tmp_path / "real")
    (tmp_path / "goals").symlink_to(real)  # a watch that cannot be added (IN_DONT_FOLLOW)
    linked = GoalWatch(str(tmp_path / "goals"))
    missing = GoalWatch(str(tmp_path / "nowhere"))
    not_local = GoalWatch("/proc/self/fd")  # a directory on a file system not trusted
    try:
        for watch in (linked, missing, not_local):
            assert watch.listed() is None
            assert watch.listed() is None
            assert watch.listings == 0
    finally:
        for watch in (linked, missing, not_local):
            watch.close()
    assert local(str(tmp_path)) and not local("/proc/self") and not local("/sys/kernel")


# -- what it vouches for ------------------------------------------------------------


def test_the_line_is_the_surveys_and_quiet_calls_list_nothing(
    tmp_path: Path, watch: GoalWatch
) -> None:
    folder = _goals(tmp_path)
    (folder / "archive").mkdir()
    (folder / "notes.txt").write_text("not a goal\n")
    (folder / ".swap.md").write_text("an editor's\n")
    (folder / "odd name.md").write_text("# spaces\n")
    line = _current(watch, folder)
    assert line.startswith(f"g goals {len(os.listdir(folder))} ")
    for _ in range(3):
        assert _current(watch, folder) == line
    assert watch.listings == 1
    (folder / "archive" / "old.md").write_text("# archived: not in the line\n")
    assert _current(watch, folder) == line
