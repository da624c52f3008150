"""A beat skips a folder of history whose stat is unchanged since its records all fit,
yet still catches what a beat acts on: live rounds and pending asks, every beat."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from looop_py.asks import mailbox
from looop_py.beat import corrupt
from looop_py.engine.rounds import Phase, RoundState
from looop_py.engine.spec import LoopSpec
from looop_py.loops import store
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd
from tests.history import archive_round
from tests.opens import counted

SPEC = LoopSpec.from_dict({"name": "sweep", "intent": "x", "level": "L1"})
HISTORY = ("rounds/done", "asks", "answers")


def _history(wd: Paths, now: float) -> None:
    """Ten archived rounds, five answered asks, one pending ask, one live round."""
    w = open_wd(wd)
    for i in range(10):
        archive_round(w, f"sweep-{i:04}", now - 3600 * (i + 2))
    for i in range(5):
        ask = mailbox.open_ask(w, prompt=f"ok {i}?", asker="human", now=now - 900 + i)
        mailbox.answer(w, ask.id, "yes", now=now - 800 + i)
    mailbox.open_ask(w, prompt="still open?", asker="human", now=now - 60)
    live = RoundState(
        id="sweep-live", spec=SPEC, phase=Phase.MAKER, started_at=now - 30, updated_at=now - 30
    )
    store.rounds_of(w).save(live)


def _settled(wd: Paths, now: float) -> None:
    """History as it is after a while: its folders last changed an hour ago, and a beat
    has looked at them since (the index notes each folder's stat)."""
    for rel in HISTORY:
        os.utime(wd.root / rel, (now - 3600, now - 3600))
    assert corrupt.check_records(open_wd(wd), now) == []
    dirs = json.loads((wd.state / corrupt.INDEX_NAME).read_text())["dirs"]
    assert sorted(dirs) == sorted(HISTORY)


def _damage(path: Path) -> None:
    """Same size, mtime put back: only the ctime and inode-level stat tell."""
    st = path.stat()
    with path.open("r+b") as f:
        f.write(b"#" * 8)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def _pending(wd: Paths) -> Path:
    answered = {p.name for p in wd.answers.iterdir()}
    (path,) = [p for p in wd.asks.iterdir() if p.name not in answered]
    return path


def test_a_pending_ask_damaged_in_place_is_set_aside_while_history_is_skipped(
    wd: Paths,
) -> None:
    now = time.time()
    _history(wd, now)
    _settled(wd, now)
    path = _pending(wd)
    _damage(path)
    moved = corrupt.check_records(open_wd(wd), now + 1)
    assert [e["path"] for e in moved] == [f"asks/{path.name}"]
    assert not path.exists()


def test_a_live_round_damaged_in_place_is_set_aside_while_history_is_skipped(
    wd: Paths,
) -> None:
    now = time.time()
    _history(wd, now)
    _settled(wd, now)
    path = wd.rounds / "sweep-live.json"
    _damage(path)
    moved = corrupt.check_records(open_wd(wd), now + 1)
    assert [e["path"] for e in moved] == ["rounds/sweep-live.json"]


def test_a_record_that_arrives_in_a_skipped_folder_is_read(wd: Paths) -> None:
    now = time.time()
    _history(wd, now)
    _settled(wd, now)
    for rel in HISTORY:  # a new file moves the folder's stat: the folder is looked at
        (wd.root / rel / "bogus-1.json").write_text("{not json")
    moved = corrupt.check_records(open_wd(wd), now + 1)
    assert sorted(e["path"] for e in moved) == sorted(f"{r}/bogus-1.json" for r in HISTORY)


def test_an_archived_round_damaged_in_place_is_caught_by_the_daily_look(wd: Paths) -> None:
    now = time.time()
    _history(wd, now)
    _settled(wd, now)
    path = wd.rounds / "done" / "sweep-0003.json"
    _damage(path)
    assert corrupt.check_records(open_wd(wd), now + 60) == []  # history: not looked at
    later = now + corrupt.SWEEP_S + 1
    moved = corrupt.check_records(open_wd(wd), later)
    assert [e["path"] for e in moved] == ["rounds/done/sweep-0003.json"]


def test_a_damaged_folder_note_means_look_record_by_record(wd: Paths) -> None:
    now = time.time()
    _history(wd, now)
    _settled(wd, now)
    path = wd.rounds / "done" / "sweep-0003.json"
    _damage(path)
    index = wd.state / corrupt.INDEX_NAME
    fit = json.loads(index.read_text())["fit"]
    folder = wd.rounds / "done"

    def noted(note: object) -> list[str]:
        st = folder.stat()
        stamp = [st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        shaped = note(stamp) if callable(note) else note
        index.write_text(
            json.dumps({"v": corrupt.INDEX_V, "fit": fit, "dirs": {"rounds/done": shaped}})
        )
        return [e["path"] for e in corrupt.check_records(open_wd(wd), now + 60)]

    assert noted(lambda s: [*s, now]) == []  # the note as a beat writes it: trusted
    shapes = [
        "x",
        None,
        lambda s: s,
        lambda s: [*s, True],
        lambda s: [*s, "0"],
        lambda s: [*s, now + 3600],  # looked at in the future
        lambda s: [s[0] + 1, *s[1:], now],  # another stat
    ]
    for note in shapes:
        assert noted(note) == ["rounds/done/sweep-0003.json"], note
        next((wd.root / "corrupt" / "rounds" / "done").iterdir()).rename(path)
        os.utime(folder, (now - 3600, now - 3600))


def test_a_folder_changed_within_its_tick_is_not_trusted(wd: Paths) -> None:
    """A folder whose mtime is this recent could change again without its stat moving."""
    now = time.time()
    _history(wd, now)
    assert corrupt.check_records(open_wd(wd), now) == []
    dirs = json.loads((wd.state / corrupt.INDEX_NAME).read_text()).get("dirs", {})
    assert not set(dirs) & set(HISTORY)


def test_a_beat_lists_no_unchanged_history_folder(wd: Paths) -> None:
    now = time.time()
    _history(wd, now)
    _settled(wd, now)
    body = (
        "import collections\n"
        "scans = collections.Counter()\n"
        "def seen(event, args):\n"
        "    if event == 'os.scandir' and args[0] is not None:\n"
        "        scans[os.path.relpath(os.fsdecode(args[0]), root)] += 1\n"
        "sys.addaudithook(seen)\n"
        "from looop_py.beat import corrupt\n"
        "moved = corrupt.check_records(wd, float(sys.argv[2]))\n"
        "print(json.dumps({'moved': moved, 'scans': scans, 'opens': opens}))\n"
    )
    got = counted(wd.root, body, str(now + 60))
    assert got["moved"] == []
    assert not set(got["scans"]) & set(HISTORY), got["scans"]
    assert "rounds" in got["scans"]  # live rounds are listed every beat
    history = [k for k in got["opens"] if k.startswith(("rounds/", "asks/", "answers/"))]
    assert history == [], history
