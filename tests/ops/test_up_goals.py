"""`looop up` beats quietly through the seal with goals/ vouched for by inotify, and still
sees every goal edit: in place with its size and mtime kept, during a beat, through a
symlink or through `looop up` itself. Counted: a quiet `up` beat stats no goal; a cron
beat still stats each (strace, real syscalls)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.ops.goalwatch import GoalWatch
from looop_py.ops.resident import up_beat
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, wait_for, write_sensor
from tests.edits import edit_in_place


def _beats(wd: Paths) -> list[dict[str, object]]:
    try:
        lines = wd.events.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    return [e for e in map(jsonio.loads, lines) if e.get("event") == "beat"]


def _goals(wd: Paths, n: int) -> None:
    for i in range(n):
        (wd.goals / f"goal-{i:03}.md").write_text(f"# Goal {i}\n")


def _changed(result: BeatResult) -> set[str]:
    return {c.item for c in result.changed}


def _sealed_up(wd: Paths, watch: GoalWatch) -> None:
    """Beat until `up`'s beats are quiet ones, through the seal, with goals/ vouched for."""
    first = up_beat(open_wd(wd), watch)
    assert first.outcome is BeatOutcome.DECIDED
    for _ in range(2):
        assert up_beat(open_wd(wd), watch).outcome is BeatOutcome.SKIPPED
        assert _beats(wd)[-1].get("sealed") is True
    assert watch.listings == 1  # listed once, then vouched for


@pytest.fixture
def watch(wd: Paths) -> GoalWatch:
    found = GoalWatch(str(wd.goals))
    yield found  # type: ignore[misc]
    found.close()


def test_an_edit_in_place_keeping_size_and_mtime_reaches_the_next_up_beat(
    wd: Paths, watch: GoalWatch
) -> None:
    write_sensor(wd, "steady", "echo '{\"signal\": 1}'")
    _goals(wd, 20)
    _sealed_up(wd, watch)
    edit_in_place(wd.goals / "goal-005.md", "# Goal X\n")
    seen = up_beat(open_wd(wd), watch)
    assert seen.outcome is BeatOutcome.DECIDED and _changed(seen) == {"goal:goal-005"}
    for _ in range(2):  # and quiet again: the full beat's reads of goals/ are no change
        assert up_beat(open_wd(wd), watch).outcome is BeatOutcome.SKIPPED
        assert _beats(wd)[-1].get("sealed") is True
    assert (watch.listings, watch.restats) == (1, 1)  # that goal lstat'ed again, alone


def test_an_edit_made_while_a_beat_runs_reaches_the_next(wd: Paths, watch: GoalWatch) -> None:
    # The sensor edits a goal in place once, while the quiet beat runs it (and surveys).
    write_sensor(
        wd,
        "editor",
        "if [ -f edit-now ]; then rm edit-now; g=goals/goal-003.md; touch -r $g .ref;"
        " printf '# Goal Y\\n' > $g; touch -r .ref $g; fi\necho '{\"signal\": 1}'",
    )
    _goals(wd, 10)
    _sealed_up(wd, watch)
    (wd.root / "edit-now").write_text("")
    during = up_beat(open_wd(wd), watch)
    after = up_beat(open_wd(wd), watch)
    assert "goal:goal-003" in _changed(during) | _changed(after)
    assert after.outcome is BeatOutcome.DECIDED or during.outcome is BeatOutcome.DECIDED
    assert up_beat(open_wd(wd), watch).outcome is BeatOutcome.SKIPPED


def test_a_symlinked_goal_whose_target_changes_outside_goals(wd: Paths, watch: GoalWatch) -> None:
    write_sensor(wd, "steady", "echo '{\"signal\": 1}'")
    _goals(wd, 5)
    notes = wd.root / "notes"
    notes.mkdir()
    (notes / "target.md").write_text("# Target\n")
    (wd.goals / "linked.md").symlink_to(notes / "target.md")
    assert up_beat(open_wd(wd), watch).outcome is BeatOutcome.DECIDED
    up_beat(open_wd(wd), watch)
    edit_in_place(notes / "target.md", "# Tarxet\n")  # no event in goals/
    seen = up_beat(open_wd(wd), watch)
    assert seen.outcome is BeatOutcome.DECIDED and _changed(seen) == {"goal:linked"}


def test_goals_replaced_by_another_folder_reaches_the_next_up_beat(
    wd: Paths, watch: GoalWatch
) -> None:
    write_sensor(wd, "steady", "echo '{\"signal\": 1}'")
    _goals(wd, 10)
    _sealed_up(wd, watch)
    other = wd.root / "other"
    shutil.copytree(wd.goals, other)
    edit_in_place(other / "goal-001.md", "# Goal Z\n")
    os.rename(wd.goals, wd.root / "goals.old")
    os.rename(other, wd.goals)
    seen = up_beat(open_wd(wd), watch)
    assert seen.outcome is BeatOutcome.DECIDED and _changed(seen) == {"goal:goal-001"}
    edit_in_place(wd.goals / "goal-002.md", "# Goal W\n")  # the new folder is watched
    edit_in_place(wd.root / "goals.old" / "goal-004.md", "# Goal V\n")  # not a goal now
    again = up_beat(open_wd(wd), watch)
    assert _changed(again) == {"goal:goal-002"}


def test_without_a_watch_on_goals_the_survey_stats_every_goal(wd: Paths, watch: GoalWatch) -> None:
    write_sensor(wd, "steady", "echo '{\"signal\": 1}'")
    real = wd.root / "real-goals"
    wd.goals.rename(real)
    wd.goals.symlink_to(real)  # a watch cannot be added (IN_DONT_FOLLOW): no vouching
    _goals(wd, 10)
    assert up_beat(open_wd(wd), watch).outcome is BeatOutcome.DECIDED
    for _ in range(2):
        assert up_beat(open_wd(wd), watch).outcome is BeatOutcome.SKIPPED
        assert _beats(wd)[-1].get("sealed") is True  # quiet all the same, by the survey's lstat
    edit_in_place(real / "goal-006.md", "# Goal R\n")
    seen = up_beat(open_wd(wd), watch)
    assert seen.outcome is BeatOutcome.DECIDED and _changed(seen) == {"goal:goal-006"}
    assert watch.listings == 0


# -- counted: the syscalls themselves ------------------------------------------------

_MARK = "/.looop-test-mark"
_GOAL = re.compile(r'["/]goal-\d+\.md"')  # by path or by name beside a folder's descriptor


def _goal_stats(log: Path) -> tuple[int, int]:
    """Stat calls naming a goal in an strace log: between the two marks, and in all."""
    between = total = 0
    inside = False
    for line in log.read_text().splitlines():
        if _MARK in line:
            inside = not inside
            continue
        if _GOAL.search(line):
            total += 1
            between += inside
    return between, total


STRACE = ["strace", "-f", "-qq", "-e", "trace=%%stat"]  # every stat variant


@contextmanager
def _up(
    wd: Paths, *args: str, strace: Path | None = None
) -> Iterator[tuple[list[str], dict[str, str]]]:
    """A real `looop up ARGS` (under strace, logging to `strace`, if given) for the body;
    stopped by `looop down`, and it must have ended without a traceback. Yields the command
    that runs looop on this work dir, and the environment (this one's, less LOOOP_DIR)."""
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    looop = [sys.executable, "-m", "looop_py", "-C", str(wd.root)]
    traced = [] if strace is None else [*STRACE, "-o", str(strace)]
    proc = subprocess.Popen(
        [*traced, *looop, "up", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield looop, env
    finally:  # `looop down` signals `up` itself (strace, its parent, then ends with it)
        subprocess.run([*looop, "down"], timeout=60, env=env, capture_output=True)
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace counts the syscalls")
def test_a_quiet_up_beat_stats_no_goal_and_a_cron_beat_stats_each(
    wd: Paths, tmp_path: Path
) -> None:
    n = 300
    write_sensor(wd, "steady", "echo '{\"signal\": 1}'")
    _goals(wd, n)
    child = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "from looop_py.coord.choose import open_workdir\n"
        "from looop_py.ops.goalwatch import GoalWatch\n"
        "from looop_py.ops.resident import up_beat\n"
        "from looop_py.workdir.paths import Paths\n"
        "wd = open_workdir(Paths(Path(sys.argv[1])))\n"
        "watch = GoalWatch(str(wd.paths.goals))\n"
        "first = [up_beat(wd, watch).outcome for _ in range(2)]  # seal; then list goals/ once\n"
        "def mark():\n"
        "    try:\n"
        f"        os.lstat({_MARK!r})\n"
        "    except OSError:\n"
        "        pass\n"
        "mark()\n"
        "quiet = [up_beat(wd, watch).outcome for _ in range(3)]\n"
        "mark()\n"
        "print(json.dumps({'first': first, 'quiet': quiet, 'listings': watch.listings}))\n"
    )
    log = tmp_path / "up.strace"
    done = subprocess.run(
        [*STRACE, "-o", str(log), sys.executable, "-c", child, str(wd.root)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"first": ["decided", "skipped"], "quiet": ["skipped"] * 3, "listings": 1}
    assert all(b.get("sealed") for b in _beats(wd)[-4:])
    quiet_stats, all_stats = _goal_stats(log)
    assert quiet_stats == 0, "a quiet `up` beat stat'ed a goal"
    assert all_stats == n  # the watch's one listing, which the first full beat took too

    cron = [sys.executable, "-m", "looop_py", "-C", str(wd.root), "pulse", "-q"]
    subprocess.run(cron, check=True, timeout=60)  # the seal for this command's own process
    log = tmp_path / "cron.strace"
    subprocess.run([*STRACE, "-o", str(log), *cron], check=True, timeout=60)
    assert _beats(wd)[-1].get("sealed") is True
    assert _goal_stats(log)[1] >= n  # the cron beat lstats every goal, as before


# -- the process: `looop up` itself --------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace counts the syscalls")
def test_looop_up_s_full_beat_after_a_signal_changed_stats_no_goal(
    wd: Paths, tmp_path: Path
) -> None:
    """A real `looop up` at 1,200 goals: the full beat a changed signal starts takes goals/ as
    the watch vouches for it (no stat of any goal), and hashes the world a cron beat does.
    The sensor marks each beat in the strace log (a stat of /.looop-test-mark-VALUE)."""
    n = 1200
    (wd.root / "value").write_text("1\n")
    write_sensor(wd, "valued", f'v=$(cat value); test -e {_MARK}-$v; echo "{{\\"signal\\": $v}}"')
    _goals(wd, n)
    log = tmp_path / "up.strace"
    with _up(wd, "--interval", "1", strace=log) as (looop, env):
        wait_for(
            lambda: sum(bool(b.get("sealed")) for b in _beats(wd)) >= 2,
            timeout=60,
            what=lambda: _beats(wd)[-3:],
        )
        before = len(_beats(wd))
        (wd.root / "value").write_text("2\n")

        def full_then_quiet() -> bool:
            after = _beats(wd)[before:]
            full = [i for i, b in enumerate(after) if b.get("outcome") == "decided"]
            return bool(full) and any(b.get("sealed") for b in after[full[0] + 1 :])

        wait_for(full_then_quiet, timeout=60, what=lambda: _beats(wd)[-3:])
    full = next(b for b in _beats(wd)[before:] if b.get("outcome") == "decided")
    assert [c.get("item") for c in full["changed"]] == ["snap:sensor-valued"]  # type: ignore[union-attr]

    lines = log.read_text().splitlines()
    marks = [i for i, line in enumerate(lines) if f"{_MARK}-2" in line]
    assert len(marks) >= 2  # the beat that found the change, and a quiet one after its full beat
    between = [line for line in lines[marks[0] : marks[-1]] if _GOAL.search(line)]
    assert between == [], "the full beat stat'ed a goal"
    assert sum(bool(_GOAL.search(line)) for line in lines) == n  # the watch's one listing

    subprocess.run([*looop, "pulse", "-q", "--force"], check=True, timeout=60, env=env)
    assert _beats(wd)[-1]["world_hash"] == full["world_hash"]


@pytest.mark.slow
def test_looop_up_sees_an_edit_in_place_after_quiet_beats(wd: Paths) -> None:
    write_sensor(wd, "steady", "echo '{\"signal\": 1}'")
    _goals(wd, 50)
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "up", "--interval", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # two quiet beats: the second is vouched for by the watch (the first listed goals/)
        wait_for(
            lambda: sum(bool(b.get("sealed")) for b in _beats(wd)) >= 2,
            timeout=30,
            what=lambda: _beats(wd)[-3:],
        )
        before = len(_beats(wd))
        edit_in_place(wd.goals / "goal-017.md", "# Goal QQ\n")

        def saw_it() -> bool:
            return any(
                c.get("item") == "goal:goal-017"
                for b in _beats(wd)[before:]
                for c in b.get("changed", [])  # type: ignore[union-attr]
            )

        wait_for(saw_it, timeout=20, what=lambda: _beats(wd)[-3:])
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert "Traceback" not in err, err


def test_a_beat_handed_over_counts_the_sensors_the_quiet_attempt_ran(
    wd: Paths, watch: GoalWatch
) -> None:
    """The sensors run once, in the quiet attempt; the full beat it hands over to reports
    its `ms` from there (a lower bound: the sensor's own sleep), as `looop pulse` does."""
    (wd.root / "value").write_text("1\n")
    write_sensor(wd, "slow", 'sleep 0.3; echo "{\\"signal\\": $(cat value)}"')
    _goals(wd, 3)
    _sealed_up(wd, watch)
    (wd.root / "value").write_text("2\n")
    result = up_beat(open_wd(wd), watch)
    assert result.outcome is BeatOutcome.DECIDED and _changed(result) == {"snap:sensor-slow"}
    assert result.duration_s >= 0.3
    assert float(_beats(wd)[-1]["ms"]) >= 300  # type: ignore[arg-type]


@pytest.mark.slow
def test_looop_up_json_sees_a_goal_edited_in_place(wd: Paths) -> None:
    """`looop up --json` runs a full beat each time (it prints the readings): a goal edited
    in place, size and mtime kept, is a change in the next beat all the same."""
    write_sensor(wd, "steady", "echo '{\"signal\": 1}'")
    _goals(wd, 50)
    with _up(wd, "--json", "--interval", "1"):
        wait_for(lambda: len(_beats(wd)) >= 2, timeout=30, what=lambda: _beats(wd)[-3:])
        before = len(_beats(wd))
        edit_in_place(wd.goals / "goal-007.md", "# Goal X\n")

        def seen() -> bool:
            changed = [c for b in _beats(wd)[before:] for c in b.get("changed") or ()]  # type: ignore[attr-defined]
            return any(c.get("item") == "goal:goal-007" for c in changed)

        wait_for(seen, timeout=30, what=lambda: _beats(wd)[-3:])


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.skipif(shutil.which("strace") is None, reason="strace counts the syscalls")
def test_looop_up_json_s_full_beats_stat_no_goal_after_the_watch_listed(
    wd: Paths, tmp_path: Path
) -> None:
    """`looop up --json` (and `-v`): every beat is a full one, and each takes goals/ as the
    inotify watch vouches for it, as `looop up`'s full beats do: one listing in all."""
    n = 300
    write_sensor(wd, "steady", "echo '{\"signal\": 1}'")
    _goals(wd, n)
    log = tmp_path / "up.strace"
    with _up(wd, "--json", "--interval", "1", strace=log) as (looop, env):
        wait_for(lambda: len(_beats(wd)) >= 4, timeout=60, what=lambda: _beats(wd)[-3:])
    beats = _beats(wd)
    assert len(beats) >= 4 and not any(b.get("sealed") for b in beats)  # all full beats
    stats = sum(bool(_GOAL.search(line)) for line in log.read_text().splitlines())
    assert stats == n, f"{stats} stats of a goal in {len(beats)} beats: the watch lists once"
    subprocess.run([*looop, "pulse", "-q", "--force"], check=True, timeout=60, env=env)
    assert _beats(wd)[-1]["world_hash"] == beats[-1]["world_hash"]
