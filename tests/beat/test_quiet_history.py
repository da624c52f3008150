"""History in the seal: one line per history folder, by name and inode, so a quiet beat
costs the same after a year of finished rounds and answered asks as on day one (issue
#26, item 5), while every record a beat acts on stays surveyed file by file; and the
survey taken while the sensors run (beat/quiet.py), so nothing it finds changed costs
a sensor run twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from looop_py.asks import mailbox
from looop_py.sensing import seal, survey
from looop_py.workdir.paths import Paths
from tests.beat.test_quiet import _pulse, _sensed_hash
from tests.conftest import open_wd, write_sensor
from tests.history import archive_round


def _add_history(wd: Paths, rounds: int, asks: int, *, start: int = 0) -> None:
    """Archived rounds and answered asks, written by the code that writes them."""
    w = open_wd(wd)
    now = time.time()
    for i in range(start, start + rounds):
        archive_round(w, f"sweep-{i:04}", now - 3600 * (i + 2))
    for i in range(asks):
        ask = mailbox.open_ask(w, prompt=f"ok {start + i}?", asker="human", now=now - 900)
        mailbox.answer(w, ask.id, "yes", now=now - 800)


def _sealed_wd(wd: Paths) -> Paths:
    write_sensor(wd, "steady", 'echo "{\\"signal\\": 1}"; echo x >> runs.log')
    (wd.goals / "alpha.md").write_text("# Alpha\n\nkeep it up\n")
    _add_history(wd, 3, 2)
    _pulse(wd, "--force")
    _pulse(wd)  # the answers wake the loop once; this one seals what it found
    assert _pulse(wd).get("sealed") is True
    return wd


def _runs(wd: Paths) -> int:
    return (wd.root / "runs.log").read_text().count("x")


# -- what moves a history line, and what does not -------------------------------------


def _replace(path: Path) -> None:
    """The same bytes under a new inode, as a writer that replaces by rename leaves it."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(path.read_bytes())
    os.replace(tmp, path)


def _in_place(path: Path) -> None:
    """Same inode, same size, mtime put back: what no writer of history does."""
    st = path.stat()
    with path.open("r+b") as f:
        f.write(b"#" * 4)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


HISTORY_CHANGES = {
    "an archived round arrives": lambda wd: _add_history(wd, 1, 0, start=50),
    "an archived round removed": lambda wd: (wd.rounds / "done" / "sweep-0001.json").unlink(),
    "an archived round renamed": lambda wd: (wd.rounds / "done" / "sweep-0001.json").rename(
        wd.rounds / "done" / "sweep-0099.json"
    ),
    "an archived round replaced": lambda wd: _replace(wd.rounds / "done" / "sweep-0002.json"),
    "an answer replaced (answer --force)": lambda wd: _replace(next(wd.answers.glob("*.json"))),
    "an answered ask replaced": lambda wd: _replace(wd.asks / next(wd.answers.glob("*.json")).name),
    "an answer removed": lambda wd: next(wd.answers.glob("*.json")).unlink(),
    "a stray file in answers/": lambda wd: (wd.answers / "notes.txt").write_text("x"),
}


@pytest.mark.parametrize("name", sorted(HISTORY_CHANGES))
def test_no_change_to_history_slips_past_the_seal(wd: Paths, name: str) -> None:
    _sealed_wd(wd)
    runs = _runs(wd)
    HISTORY_CHANGES[name](wd)
    beat = _pulse(wd)
    assert not beat.get("sealed"), f"{name}: the seal vouched for a changed history"
    assert beat["world_hash"] == _sensed_hash(wd)
    assert _runs(wd) == runs + 2, "the sensor ran once in the beat (and once in `sense`)"


def test_history_edited_in_place_stays_quiet_and_the_world_is_still_the_sensed_one(
    wd: Paths,
) -> None:
    """No writer edits history in place and no beat acts on it: the quiet beat does not
    look (the full beat's daily look sets such a record aside: test_history_folders.py),
    and the world it vouches for is what a full sense finds."""
    _sealed_wd(wd)
    _in_place(wd.rounds / "done" / "sweep-0000.json")
    _in_place(next(wd.answers.glob("*.json")))
    beat = _pulse(wd)
    assert beat.get("sealed") is True
    assert beat["world_hash"] == _sensed_hash(wd)


def test_a_pending_ask_stays_file_by_file_and_answered_ones_are_one_line(wd: Paths) -> None:
    _add_history(wd, 2, 3)
    pending = mailbox.open_ask(open_wd(wd), prompt="open?", asker="human", now=time.time())
    (wd.asks / ".x.tmp").write_text("{")  # a dotfile in asks/ counts for its emptiness
    lines = survey.survey(str(wd.root))
    files = sorted(ln.split(" ")[1] for ln in lines if ln.startswith("f asks/"))
    assert files == ["asks/.x.tmp", f"asks/{pending.id}.json"]
    assert not [ln for ln in lines if ln.startswith(("f answers/", "f rounds/done/"))]
    history = {ln.split(" ")[1]: ln.split(" ")[2] for ln in lines if ln.startswith("h ")}
    assert history == {"answers": "3", "asks": "3", "rounds/done": "2"}
    before = lines
    path = wd.asks / f"{pending.id}.json"
    st = path.stat()
    with path.open("r+b") as f:  # the pending ask edited in place, mtime put back
        f.write(b" ")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert survey.survey(str(wd.root)) != before, "a pending ask is surveyed by its stat"


def test_a_stray_file_in_a_history_folder_is_never_sealed(wd: Paths) -> None:
    _sealed_wd(wd)
    (wd.answers / "notes.txt").write_text("x")
    for _ in range(2):
        assert _pulse(wd).get("sealed") is not True
        assert not (wd.root / seal.SEAL).exists(), "the seal refuses a file that is no record"


# -- counted: a quiet beat's stat calls do not grow with history ------------------------

COUNT_LSTATS = """
import os, sys
calls = []
real = os.lstat
def lstat(path, *args, **kwargs):
    calls.append(path)
    return real(path, *args, **kwargs)
os.lstat = lstat
def stay(code):
    raise SystemExit(code)
os._exit = stay
sys.argv = [sys.argv[0], "-C", sys.argv[1], "pulse"]
from looop_py.console import main
try:
    main()
except SystemExit:
    pass
print("LSTATS", len(calls))
"""


def _quiet_lstats(wd: Paths) -> int:
    """os.lstat calls in one quiet beat of a fresh interpreter (which must be sealed)."""
    done = subprocess.run(
        [sys.executable, "-c", COUNT_LSTATS, str(wd.root)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    beat = json.loads(wd.events.read_text().splitlines()[-1])
    assert beat.get("sealed") is True, done.stdout + done.stderr
    return int(done.stdout.split("LSTATS ", 1)[1].split()[0])


def test_a_quiet_beats_stat_calls_do_not_grow_with_history(wd: Paths) -> None:
    _sealed_wd(wd)
    subprocess.run([sys.executable, "-c", COUNT_LSTATS, str(wd.root)], check=True)  # seals
    small = _quiet_lstats(wd)  # 3 archived rounds, 2 answered asks
    _add_history(wd, 120, 40, start=10)
    _pulse(wd)
    subprocess.run([sys.executable, "-c", COUNT_LSTATS, str(wd.root)], check=True)
    assert _quiet_lstats(wd) == small, "a stat per record came back"
    (wd.goals / "beta.md").write_text("# Beta\n")  # goals are still taken one by one
    _pulse(wd)
    subprocess.run([sys.executable, "-c", COUNT_LSTATS, str(wd.root)], check=True)
    assert _quiet_lstats(wd) == small + 1


# -- the survey taken while the sensors run -------------------------------------------


def test_a_goal_changed_under_a_seal_runs_each_sensor_once(wd: Paths) -> None:
    """The rest of the survey is taken while the sensors run: a change it finds hands
    their runs to the full beat, which does not run them again."""
    _sealed_wd(wd)
    runs = _runs(wd)
    (wd.goals / "alpha.md").write_text("# Alpha\n\nkeep it UP\n")
    beat = _pulse(wd)
    assert beat["outcome"] == "decided" and not beat.get("sealed")
    assert _runs(wd) == runs + 1, "one run per beat"


SENSING_CHANGES = {
    "the config": lambda wd: wd.config.write_text(
        wd.config.read_text().replace("# timeout_s = 60 ", "timeout_s = 7 ", 1)
    ),
    "the sensor's script": lambda wd: write_sensor(
        wd, "steady", 'echo "{\\"signal\\": 2}"; echo y >> runs.log'
    ),
    "a new sensor": lambda wd: write_sensor(wd, "new", "echo z >> runs.log; echo 1"),
}


@pytest.mark.parametrize("name", sorted(SENSING_CHANGES))
def test_no_sensor_runs_under_a_seal_whose_config_or_scripts_changed(wd: Paths, name: str) -> None:
    """What the runs rest on (the config, sensors/ and each script) is checked before
    any sensor starts: each runs once, as the full beat runs it, never under the old
    seal's timeouts or script list."""
    _sealed_wd(wd)
    runs = (wd.root / "runs.log").read_text()
    SENSING_CHANGES[name](wd)
    beat = _pulse(wd)
    assert not beat.get("sealed")
    new = (wd.root / "runs.log").read_text().removeprefix(runs)
    assert sorted(new.split()) == sorted({"the config": "x", "a new sensor": "xz"}.get(name, "y"))
    assert beat["world_hash"] == _sensed_hash(wd)
