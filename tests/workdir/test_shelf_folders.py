"""Each kind of shared record in its folder of the work dir (the files shelf, workdir/shelf.py)."""

from __future__ import annotations

import pytest

from looop_py.errors import UsageError
from looop_py.workdir import shelf
from looop_py.workdir.paths import Paths

# The table in workdir/shelf.py's module doc, relative to the work dir.
FOLDERS = {
    "asks": "asks",
    "answers": "answers",
    "approved": "state/approved",
    "forged": "state/forged",
    "rounds": "rounds",
    "rounds-done": "rounds/done",
    "timers": "state/schedules",
    "state": "state",
    "memory": "memory",
}


def test_a_kind_the_shelf_does_not_know_has_no_folder(wd: Paths) -> None:
    for kind in ("", "ask", "rounds/done", "../state", "STATE"):
        with pytest.raises(UsageError):
            shelf.directory(wd, kind)


def test_each_kind_is_written_to_its_own_folder(wd: Paths) -> None:
    assert set(FOLDERS) == set(shelf.KINDS)
    files = shelf.FilesShelf(wd)
    for kind, folder in FOLDERS.items():
        assert shelf.directory(wd, kind) == wd.root / folder
        (wd.root / folder).mkdir(parents=True, exist_ok=True)
        files.put(kind, "r1", b'{"n": 1}')
        assert (wd.root / folder / "r1.json").read_bytes() == b'{"n": 1}'
        assert files.names(kind) == ["r1"]
        (wd.root / folder / "r1.json").unlink()
