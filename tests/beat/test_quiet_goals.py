"""The goals in the seal: one digest line however many goals, and no change to one
goal among thousands slips past it (issue #26, item 2: a quiet beat flat in goals)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from looop_py.sensing import seal, survey
from looop_py.workdir.paths import Paths
from tests.beat.test_quiet import _pulse, _sensed_hash

MANY = 10_000


def _goal(i: int) -> str:
    return f"goal-{i:05}.md"


def _in_place(path: Path) -> None:
    """Same inode, same size, mtime put back: only the ctime tells."""
    st = path.stat()
    body = path.read_bytes()
    with path.open("r+b") as f:
        f.write(body.swapcase())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        st.st_ino,
        st.st_size,
        st.st_mtime_ns,
    )


def _replaced(path: Path) -> None:
    """The same bytes under a new inode, mtime put back."""
    st = path.stat()
    tmp = path.with_name(".tmp")
    tmp.write_bytes(path.read_bytes())
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


CHANGES: dict[str, Callable[[Path], None]] = {
    "a goal edited in place (size, mtime kept)": lambda g: _in_place(g / _goal(MANY // 2)),
    "a goal's bytes under a new inode": lambda g: _replaced(g / _goal(7)),
    "a goal renamed": lambda g: (g / _goal(MANY - 1)).rename(g / "goal-zz.md"),
    "a goal's mode": lambda g: (g / _goal(3)).chmod(0o600),
    "a goal removed": lambda g: (g / _goal(11)).unlink(),
    "a goal added": lambda g: (g / "goal-new.md").write_text("# New\n"),
    "a stray file added": lambda g: (g / "notes.txt").write_text("scratch\n"),
}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_no_change_to_one_goal_among_ten_thousand_slips_past_the_seal(wd: Paths) -> None:
    """Each change in turn: never a sealed skip, the beat's world is what a full sense
    sees, and the full beat that follows seals the new world again."""
    for i in range(MANY):
        (wd.goals / _goal(i)).write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    assert _pulse(wd, "--force")["outcome"] == "decided"
    assert _pulse(wd).get("sealed") is True
    text = (wd.root / seal.SEAL).read_text()
    assert len(text.splitlines()) < 100, "the seal holds no line per goal"
    assert [ln for ln in text.splitlines() if ln.startswith("g goals ")] == [
        survey.goals_line(str(wd.goals))
    ]
    for name, change in CHANGES.items():
        change(wd.goals)
        beat = _pulse(wd)
        assert not beat.get("sealed"), f"{name}: the seal vouched for a changed goals/"
        assert beat["world_hash"] == _sensed_hash(wd), name
        assert _pulse(wd).get("sealed") is True, f"{name}: the full beat did not seal again"


# -- goals_line itself ----------------------------------------------------------------


def test_an_unlistable_goals_folder_is_its_own_line(tmp_path: Path) -> None:
    assert survey.goals_line(str(tmp_path / "missing")) == "g goals -"
    (tmp_path / "file").write_text("")
    assert survey.goals_line(str(tmp_path / "file")) == "g goals -"


def test_every_stat_field_and_every_name_moves_the_goals_line(tmp_path: Path) -> None:
    goals = tmp_path / "goals"
    goals.mkdir()
    for name in ("a.md", "b.md", "check.sh"):
        (goals / name).write_text(f"# {name}\n")
    seen = [survey.goals_line(str(goals))]

    def moved(what: str) -> None:
        line = survey.goals_line(str(goals))
        assert line not in seen, f"{what} left the goals line as it was"
        seen.append(line)

    st = (goals / "a.md").stat()
    os.utime(goals / "a.md", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    moved("an mtime")
    _in_place(goals / "a.md")
    moved("an edit in place (ctime)")
    (goals / "a.md").write_text("# a.md, longer\n")
    moved("a size")
    _replaced(goals / "b.md")
    moved("an inode")
    (goals / "b.md").chmod(0o600)
    moved("a mode")
    _in_place(goals / "check.sh")
    moved("a .sh file's ctime")
    (goals / "stray").write_text("")
    moved("a stray name")
    (goals / "stray").rename(goals / "stray2")
    moved("a stray renamed")
    (goals / "a.md").unlink()
    moved("a goal removed")


def test_the_goals_line_is_canonical_whatever_order_the_folder_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The digest is of the entries in name order, not in the order the file system
    happens to list them (the seal's writer and the quiet beat list at different times);
    hostile names (a newline, a space, bytes that are no UTF-8) are digested whole."""
    goals = tmp_path / "goals"
    goals.mkdir()
    names = ["x.md", "x.md\nn.md", "x", "y z.md", os.fsdecode(b"\xff.md"), "w.sh"]
    for name in names:
        (goals / name).write_text("")
    stats: dict[str, str] = {}
    line = survey.goals_line(str(goals), stats)
    assert line.split(" ")[:3] == ["g", "goals", str(len(names))]
    assert sorted(stats) == sorted(f"goals/{n}" for n in names if n.endswith((".md", ".sh")))
    for rel, text in stats.items():
        assert text == survey.stat_text(os.lstat(goals / rel.removeprefix("goals/")))
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: real(path)[::-1])
    assert os.listdir(str(goals)) == real(str(goals))[::-1]
    assert survey.goals_line(str(goals)) == line


def test_the_goals_line_is_the_same_in_every_process(tmp_path: Path) -> None:
    """The seal's writer and the quiet beat are different processes: the stat numbers'
    hash has no per-process seed (strings' has: the names go through xxh3)."""
    goals = tmp_path / "goals"
    goals.mkdir()
    for name in ("a.md", "b.sh", os.fsdecode(b"\xfe.md"), "stray"):
        (goals / name).write_bytes(b"x")
    code = f"from looop_py.sensing import survey; print(survey.goals_line({str(goals)!r}))"
    lines = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "random")
    }
    assert lines == {survey.goals_line(str(goals))}


def test_a_goal_gone_between_listing_and_stat_is_its_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    goals = tmp_path / "goals"
    goals.mkdir()
    for name in ("a.md", "b.md"):
        (goals / name).write_text("x")
    whole = survey.goals_line(str(goals))
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path: [*real(path), "c.md"])
    stats: dict[str, str] = {}
    line = survey.goals_line(str(goals), stats)
    assert line != whole and stats["goals/c.md"] == "-"
