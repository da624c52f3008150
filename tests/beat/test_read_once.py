"""Each beat reads PLAYBOOK and goals once: what the DIFF hashed is what the prompt shows."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from looop_py.asks import mailbox
from looop_py.beat import pulse
from looop_py.beat.decide import gather_prompt
from looop_py.beat.preview import preview
from looop_py.coord.choose import open_workdir
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.sensing import seal
from looop_py.sensing.sense import sense
from looop_py.workdir.paths import Paths
from looop_py.world import digest
from tests.conftest import open_wd, write_sensor
from tests.history import archive_round
from tests.opens import counted

LOOP_GOAL = """---
intent: Say hello on a cadence.
level: L1-report
cadence: every 1h
maker: |
  echo hello
checker: |
  echo checked
---
# hello
"""


def test_the_prompt_shows_the_goal_text_that_was_hashed(wd: Paths) -> None:
    (wd.goals / "tidy.md").write_text("# Tidy\nthe version that was hashed\n")
    seen = sense(open_wd(wd), time.time())
    (wd.goals / "tidy.md").write_text("# Tidy\nan edit made after SENSE\n")  # mid-beat edit
    text = gather_prompt(
        open_wd(wd),
        now=time.time(),
        seen=seen,
        changed=(),
        forced_by="force",
        flapping=[],
        last_failure=None,
    )
    assert "the version that was hashed" in text
    assert "an edit made after SENSE" not in text
    body = next(g.body for g in seen.goals if g.id == "tidy")
    assert seen.items["goal:tidy"] == digest(body)


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[DecideRequest] = []

    def decide(self, request: DecideRequest) -> Decision:
        self.requests.append(request)
        return Decision({"action": "noop", "reason": "recorded"})


def test_the_decider_gets_the_goals_of_the_beat_and_no_work_dir_object(wd: Paths) -> None:
    (wd.goals / "tidy.md").write_text("# Tidy\n")
    backend = Recorder()
    result = pulse.beat(open_wd(wd), decider=backend)
    assert result.outcome == "decided"
    (request,) = backend.requests
    assert {g.id for g in request.goals} == {"tidy", "welcome"}
    assert request.workdir == wd.root and request.state_dir == wd.state
    assert request.env["LOOOP_DIR"] == str(wd.root)
    assert not hasattr(request, "paths")


def _state_files(paths: Paths) -> dict[str, tuple[int, int]]:
    found = {}
    for root, _dirs, files in os.walk(paths.state):
        for name in files:
            st = (Path(root) / name).stat()
            found[str(Path(root, name).relative_to(paths.state))] = (st.st_mtime_ns, st.st_size)
    return found


def test_looop_sense_writes_nothing_under_state(wd: Paths) -> None:
    (wd.goals / "hello.md").write_text(LOOP_GOAL)
    wd.state.mkdir(exist_ok=True)
    (wd.state / "pulse.lock").touch()  # the lock file is the one thing a sense may need
    before = _state_files(wd)
    view = preview(open_workdir(wd, write_cache=False))  # as `looop sense` opens it
    assert view.would_wake is True
    assert "sys-schedules" in view.world.snapshots
    assert _state_files(wd) == before  # no config cache, loop index or schedule book

    # The pulse, by contrast, keeps its caches there.
    pulse.beat(open_wd(wd))
    after = _state_files(wd)
    assert {"config-cache.json", "loops-index.json", "loop-schedule.json"} <= set(after)


def test_a_beat_lists_goals_and_builds_the_loop_index_once(
    wd: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looop_py.loops import index as loopindex
    from looop_py.workdir import goals

    (wd.goals / "hello.md").write_text(LOOP_GOAL)
    calls = {"scan": 0, "index": 0}
    real_scan, real_index = goals._scan_now, loopindex._index

    def scan(paths: Paths, vouch: object = None) -> object:
        calls["scan"] += 1
        return real_scan(paths, vouch)

    def index(paths: Paths, *, save: bool) -> object:
        calls["index"] += 1
        return real_index(paths, save=save)

    monkeypatch.setattr(goals, "_scan_now", scan)
    monkeypatch.setattr(loopindex, "_index", index)
    pulse.beat(open_wd(wd, clock=lambda: 1_700_000_000.0))
    assert calls == {"scan": 1, "index": 1}
    assert loopindex.index(open_wd(wd)) and calls["index"] == 2  # outside a beat: worked out afresh


# -- read at most once: counted in a child interpreter by an audit hook on open() ---------------

BEAT = """
from looop_py.beat import pulse
result = pulse.beat(wd, force=sys.argv[2] == "force")
print(json.dumps({"outcome": result.outcome.value, "opens": opens}))
"""


def _opens(wd: Paths, how: str = "force") -> tuple[str, dict[str, int]]:
    """A full beat in a fresh interpreter: its outcome and how often it opened each file."""
    found = counted(wd.root, BEAT, how)
    return found["outcome"], found["opens"]


def test_a_full_beat_opens_each_goal_sensor_and_the_playbook_once(wd: Paths) -> None:
    for i in range(12):
        (wd.goals / f"g{i:02}.md").write_text(f"# Goal {i}\n\nkeep {i} tidy\n")
    for name in ("one", "two"):
        write_sensor(wd, name, f'echo \'{{"signal": "{name}"}}\'')
    wd.playbook.write_text("# Playbook\n\nbe kind\n")
    outcome, opens = _opens(wd)
    assert outcome == "decided"
    assert (wd.root / seal.SEAL).exists(), "the seal was written from what SENSE read"
    texts = {k: n for k, n in opens.items() if k.startswith(("goals/", "sensors/", "PLAYBOOK"))}
    assert len(texts) == 12 + 1 + 2 + 1  # the starter goal too
    assert set(texts.values()) == {1}, {k: n for k, n in texts.items() if n != 1}


def test_a_goal_edited_after_sense_read_it_never_passes_the_seal(wd: Paths) -> None:
    """The decider runs between SENSE and the seal: it rewrites a goal to the same size and
    puts its mtime back, so only the inode and ctime say it changed."""
    goal = wd.goals / "tidy.md"
    goal.write_text("# Tidy\n\nthe hashed one\n")
    edit = (
        "cat > /dev/null; st=$(stat -c %Y goals/tidy.md); "
        "printf '# Tidy\\n\\nthe EDITED one\\n' > goals/.t && mv goals/.t goals/tidy.md; "
        "touch -d @$st goals/tidy.md; "
        'echo \'{"action": "noop", "reason": "edited a goal"}\''
    )
    wd.config.write_text(f'[decider]\nbackend = "command"\ncommand = {json.dumps(edit)}\n')
    result = pulse.beat(open_wd(wd), force=True)
    assert result.outcome == "decided", result.reason
    assert "EDITED" in goal.read_text()
    assert not (wd.root / seal.SEAL).exists(), "the seal vouched for bytes SENSE never read"
    wd.config.write_text('[decider]\nbackend = "noop"\n')
    assert pulse.beat(open_wd(wd)).outcome == "decided"  # the edit is seen: the world changed


def _history(wd: Paths, rounds: int, asks: int) -> None:
    w = open_wd(wd)
    now = time.time()
    for i in range(rounds):
        archive_round(w, f"sweep-{i:04}", now - 3600 * (i + 2))
    for i in range(asks):
        ask = mailbox.open_ask(w, prompt=f"ok {i}?", asker="human", now=now - 100 + i)
        mailbox.answer(w, ask.id, "yes", now=now - 50 + i)


def test_a_changed_beat_reads_no_record_that_fit_and_did_not_change(wd: Paths) -> None:
    _history(wd, rounds=30, asks=10)
    outcome, opens = _opens(wd)  # the first look reads them all, and notes that they fit
    assert outcome == "decided" and opens.get("rounds/done/sweep-0000.json") is not None
    (wd.goals / "new.md").write_text("# New\n")  # something changed: a full beat
    outcome, opens = _opens(wd, "changed")
    assert outcome == "decided"
    history = {k: n for k, n in opens.items() if k.startswith(("rounds/", "asks/", "answers/"))}
    assert history == {}, history


def test_a_record_damaged_in_place_is_still_set_aside(wd: Paths) -> None:
    """Same size, mtime put back: the ctime (and the index's stat) still tell."""
    _history(wd, rounds=3, asks=0)
    pulse.beat(open_wd(wd), force=True)
    path = wd.rounds / "done" / "sweep-0001.json"
    size, st = path.stat().st_size, path.stat()
    with path.open("r+b") as f:
        f.write(b"#" * 8)  # no longer JSON, same size
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == size
    pulse.beat(open_wd(wd), force=True)
    assert not path.exists()
    assert list((wd.root / "corrupt" / "rounds" / "done").glob("sweep-0001.json.*"))


def test_a_goals_read_stamp_is_written_as_the_survey_writes_a_stat(wd: Paths) -> None:
    """workdir/goalfile.py spells the survey's stat text itself (it does not import the
    survey); a drift would make every seal read every goal again, or never match."""
    from looop_py.sensing import survey
    from looop_py.workdir import goalfile

    (wd.goals / "tidy.md").write_text("# Tidy\n")
    goal = goalfile.read_goal("tidy", wd.goals / "tidy.md")
    assert goal is not None and goal.stamp is not None
    assert goal.stamp == survey.stat_text(os.lstat(wd.goals / "tidy.md"))
