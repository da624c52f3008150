"""The listing vouches for goals/ to the seal (workdir/listing.py `for_seal`) only when the
world holds exactly the goals listed, each at the stamp it was listed with."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from looop_py import world
from looop_py.workdir import goals, listing
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd

FOUND = [("a", "1.10.100.100.33188"), ("a-b", "2.10.100.100.33188"), ("b", "3.10.100.100.33188")]
RECORD = ("9.4096.100.100.16877", "g goals 3 xxh3:00.0")


@dataclass
class Held:
    id: str
    stamp: str | None


def _held(pairs: list[tuple[str, str | None]]) -> list[Held]:
    return [Held(g, s) for g, s in pairs]


def test_no_vouch_for_a_goal_held_at_another_stamp_missing_doubled_or_unstamped() -> None:
    hostile = {
        "another stamp": [FOUND[0], ("a-b", "2.11.100.100.33188"), FOUND[2]],
        "one missing": FOUND[:2],
        "one extra": [*FOUND, ("c", "4.10.100.100.33188")],
        "one doubled, one not held": [FOUND[0], FOUND[0], FOUND[2]],
        "held unstamped": [FOUND[0], ("a-b", None), FOUND[2]],
        "another order": [FOUND[1], FOUND[0], FOUND[2]],
    }
    for why, held in hostile.items():
        assert listing.for_seal(FOUND, {}, RECORD, _held(held)) is None, why
    gone = [FOUND[0], ("a-b", None), FOUND[2]]  # listed, then gone before its stat
    assert listing.for_seal(gone, {}, RECORD, _held(gone)) is None, "a goal with no stat"
    refused = {"out": "links out of the work dir"}
    assert listing.for_seal(FOUND, refused, RECORD, _held(FOUND)) is None, "a refused goal"
    assert listing.for_seal(FOUND, {}, None, _held(FOUND)) is None, "no record"


def test_the_listing_vouches_for_each_goal_at_its_stamp() -> None:
    listed = listing.for_seal(FOUND, {}, RECORD, _held(FOUND))
    assert listed == (*RECORD, {f"goals/{g}.md": s for g, s in FOUND})


def test_the_listed_stamps_are_the_stat_text_spelling(wd: Paths) -> None:
    """The stamp of each goal, as the listing formats it from the stat's numbers, is the one
    spelling the survey, the goal cache and the seal compare (inode.size.mtime.ctime.mode)."""
    (wd.goals / "plain.md").write_text("# Plain\n")
    (wd.goals / "linked.md").symlink_to(wd.goals / "plain.md")  # a link's stamp follows it
    os.mkfifo(wd.goals / "pipe.md")
    (wd.goals / "dangling.md").symlink_to(wd.goals / "nowhere.md")
    w = open_wd(wd)
    with w.memo.scope():
        found = dict(goals.goal_stamps(w))
    for goal_id in ("plain", "linked", "pipe"):
        st = os.stat(wd.goals / f"{goal_id}.md")
        old = f"{st.st_ino}.{st.st_size}.{st.st_mtime_ns}.{st.st_ctime_ns}.{st.st_mode}"
        assert found[goal_id] == old == world.stat_text(st), goal_id
    assert found["dangling"] is None


def test_the_side_s_own_goals_are_vouched_for_only_when_held_are_those_very_objects() -> None:
    """`known` (the goals made from the recorded side) spares the compare only when the world
    holds those very goals; any other goal, even one equal by value, is compared, and one held
    at another stamp is not vouched for."""
    known = tuple(_held(FOUND))
    for why, held in {
        "another stamp": [FOUND[0], ("a-b", "2.11.100.100.33188"), FOUND[2]],
        "one missing": FOUND[:2],
        "another order": [FOUND[1], FOUND[0], FOUND[2]],
    }.items():
        assert listing.for_seal(FOUND, {}, RECORD, tuple(_held(held)), known=known) is None, why
    assert listing.for_seal(FOUND, {}, RECORD, (), known=()) is None, "nothing held"


class Unread:
    """A goal whose id and stamp count their reads."""

    reads = 0

    def __init__(self, goal_id: str, stamp: str | None) -> None:
        self._pair = (goal_id, stamp)

    @property
    def id(self) -> str:
        Unread.reads += 1
        return self._pair[0]

    @property
    def stamp(self) -> str | None:
        Unread.reads += 1
        return self._pair[1]


def test_the_side_s_own_goals_are_not_compared_one_by_one() -> None:
    held = tuple(Unread(g, s) for g, s in FOUND)
    Unread.reads = 0
    got = listing.for_seal(FOUND, {}, RECORD, held, known=tuple(held))
    assert got is not None and Unread.reads == 0, "the side's own goals were read one by one"
    assert listing.for_seal(FOUND, {}, RECORD, held) == got
    assert Unread.reads == 2 * len(FOUND), "without `known` each goal is compared"


def test_the_record_is_the_surveys_goals_line_at_any_count(tmp_path: Path) -> None:
    """`Seen.record` sorts the listing's names and stat numbers (column by column): 0, 1 and
    several goals, listed in any order, with a .sh file and a bare name, give the line the
    survey writes."""
    import time

    from looop_py.sensing import survey
    from looop_py.workdir.goalcache import RACY_NS
    from tests.conftest import wait_for

    for count in (0, 1, 2, 7):
        folder = tmp_path / f"g{count}"
        folder.mkdir()
        names = [f"{c}.md" for c in "zyxwvut"[:count]] + ["run.sh", "notes.txt"][: count % 3]
        for name in names:
            (folder / name).write_text(f"# {name}\n")
        os.utime(folder, (time.time() - 86400,) * 2)
        ctime = folder.stat().st_ctime_ns
        wait_for(lambda c=ctime: time.time_ns() - c > RACY_NS, what="the racy window")
        seen = listing.Seen(str(folder))
        for name in os.listdir(folder):
            st = os.lstat(folder / name)
            if name.endswith(".md"):
                seen.goal(name, (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode))
            else:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
                seen.other(name, fd)
                os.close(fd)
        record, key = seen.record(), seen.key()
        assert record is not None and key is not None, count
        assert record[1] == survey.goals_line(str(folder)), count
