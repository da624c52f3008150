"""The seal's survey takes goals/ as the full beat listed it (workdir/listing.py) instead of
lstat'ing every goal again, and never vouches for a goal edited after the listing."""

from __future__ import annotations

import json
import os
import time

from looop_py.sensing import seal, survey
from looop_py.workdir import goals, listing
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for


def _settled(wd: Paths) -> None:
    """goals/ last changed more than listing.RACY_NS ago: the listing may be reused."""
    st = os.lstat(wd.goals)
    wait_for(lambda: max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - listing.RACY_NS)


def _sealed_goals_line(wd: Paths) -> str:
    sealed = seal.read(str(wd.root))
    assert sealed is not None
    return next(ln for ln in sealed.survey if ln.startswith("g goals "))


def _pulse(wd: Paths) -> str:
    done = invoke_looop("-C", str(wd.root), "pulse")
    assert done.returncode == 0, done.stderr
    events = [json.loads(ln) for ln in wd.events.read_text().splitlines()]
    return str(next(e for e in reversed(events) if e["event"] == "beat")["outcome"])


def _edit_in_place_decider(wd: Paths, goal: str) -> None:
    """A command decider that rewrites a goal in place between SENSE and the seal: same
    inode, same size, its mtime put back, so only its ctime says it changed (goals/ does not)."""
    edit = (
        f"cat > /dev/null; st=$(stat -c %Y goals/{goal}); "
        f"printf '# Tidy\\n\\nthe EDITED one\\n' > goals/{goal}; "
        f"touch -d @$st goals/{goal}; "
        'echo \'{"action": "noop", "reason": "edited a goal"}\''
    )
    wd.config.write_text(f'[decider]\nbackend = "command"\ncommand = {json.dumps(edit)}\n')


def test_a_goal_edited_in_place_between_sense_and_the_seal_is_never_sealed_over(
    wd: Paths,
) -> None:
    goal = wd.goals / "tidy.md"
    goal.write_text("# Tidy\n\nthe HASHED one\n")
    for i in range(5):
        (wd.goals / f"g{i}.md").write_text(f"# Goal {i}\n")
    _settled(wd)
    ino = goal.stat().st_ino
    _edit_in_place_decider(wd, "tidy.md")
    from looop_py.beat import pulse

    assert pulse.beat(open_wd(wd), force=True).outcome == "decided"
    assert "EDITED" in goal.read_text() and goal.stat().st_ino == ino
    assert (wd.root / seal.SEAL).exists(), "sealed from the listing: goals/ as SENSE saw it"
    assert _sealed_goals_line(wd) != survey.goals_line(str(wd.goals)), "sealed over the edit"
    wd.config.write_text('[decider]\nbackend = "noop"\n')
    assert _pulse(wd) == "decided", "the next beat saw the edit: the world changed"


def test_a_goal_added_between_sense_and_the_seal_leaves_no_seal(wd: Paths) -> None:
    (wd.goals / "tidy.md").write_text("# Tidy\n")
    _settled(wd)
    add = "cat > /dev/null; echo '# New' > goals/new.md; echo '{\"action\": \"noop\"}'"
    wd.config.write_text(f'[decider]\nbackend = "command"\ncommand = {json.dumps(add)}\n')
    from looop_py.beat import pulse

    assert pulse.beat(open_wd(wd), force=True).outcome == "decided"
    assert not (wd.root / seal.SEAL).exists(), "goals/ changed: its listing is not reused"
    wd.config.write_text('[decider]\nbackend = "noop"\n')
    assert _pulse(wd) == "decided"


def test_a_skipped_full_beat_seals_the_listing_which_is_the_surveys_line(wd: Paths) -> None:
    """Names that sort otherwise than their ids, a .sh file, a folder and a plain file: the
    listing's line is the one the survey writes, so the next beat is a quiet one."""
    for name in ("a.md", "a-b.md", "a_c.md", "b.md", "notes.txt", "x.sh"):
        (wd.goals / name).write_text(f"# {name}\n")
    (wd.goals / "drafts").mkdir()
    wd.config.write_text('[decider]\nbackend = "noop"\n')
    assert _pulse(wd) == "decided"  # commits a world (goals/ may still be too fresh)
    _settled(wd)
    w = open_wd(wd)
    with w.memo.scope():
        from looop_py.sensing.sense import sense

        world = sense(w, time.time())
        listed = goals.for_seal(w)(world.goals)
    assert listed is not None, "a settled goals/ with plain goals is reused"
    assert listed[1] == survey.goals_line(str(wd.goals))
    assert listed[2] == {
        f"goals/{n}": survey.stat_text(os.lstat(wd.goals / n))
        for n in os.listdir(wd.goals)
        if n.endswith(".md")  # the goals (the starter one too), not x.sh
    }
    assert _pulse(wd) in ("decided", "skipped")  # the full beat after the settled listing
    assert _sealed_goals_line(wd) == survey.goals_line(str(wd.goals))


def test_the_listing_is_not_reused_for_links_odd_names_or_a_fresh_folder(wd: Paths) -> None:
    (wd.goals / "tidy.md").write_text("# Tidy\n")
    w = open_wd(wd)

    def record() -> tuple[str, str] | None:
        with w.memo.scope():
            return goals._scan(w)[2]

    _settled(wd)
    assert record() is not None
    future = time.time_ns() + 10 * listing.RACY_NS  # changed in the listing's clock tick
    os.utime(wd.goals, ns=(future, future))
    assert record() is None, "goals/ changed within RACY_NS of the listing"
    os.utime(wd.goals, ns=(future - 10**12, future - 10**12))
    _settled(wd)
    assert record() is not None
    (wd.goals / "linked.md").symlink_to(wd.goals / "tidy.md")
    _settled(wd)
    assert record() is None, "a link's lstat is not what the beat read"
    (wd.goals / "linked.md").unlink()
    (wd.goals / "no good.md").write_text("x\n")
    _settled(wd)
    assert record() is None, "an .md file that is no goal"
