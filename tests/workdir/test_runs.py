"""runs/: the decide archive keeps the newest `runs_keep` runs and deletes the rest, each
without following a link out of the work dir."""

from __future__ import annotations

import os
from pathlib import Path

from looop_py.workdir import runs
from looop_py.workdir.paths import Paths


def _run(paths: Paths, name: str) -> Path:
    run = paths.runs / name
    run.mkdir(parents=True)
    (run / "prompt.md").write_text("prompt\n")
    (run / "move.json").write_text("{}\n")
    return run


# -- rainy days first ---------------------------------------------------------------------


def test_an_old_run_that_is_a_link_is_not_followed(wd: Paths, tmp_path: Path) -> None:
    """A link in runs/ to a folder elsewhere: pruning it never deletes what it points at."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    os.symlink(outside, wd.runs / "0000-link")
    (outside / "sub").mkdir()
    for name in ("2000-a", "2001-b"):
        _run(wd, name)
    runs.prune(wd, keep=2)
    assert (outside / "keep.txt").read_text() == "mine\n" and (outside / "sub").is_dir()


def test_an_old_run_holding_a_folder_or_a_link_is_removed_whole(wd: Paths, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    odd = _run(wd, "1000-odd")
    (odd / "nested" / "deeper").mkdir(parents=True)
    (odd / "nested" / "deeper" / "f").write_text("x")
    os.symlink(outside, odd / "link")
    linked = _run(wd, "1001-linked")
    os.symlink(outside, linked / "link")
    for name in ("2000-a", "2001-b"):
        _run(wd, name)
    removed = runs.prune(wd, keep=2)
    assert removed == ["1000-odd", "1001-linked"]
    assert sorted(p.name for p in wd.runs.iterdir()) == ["2000-a", "2001-b"]
    assert (outside / "keep.txt").read_text() == "mine\n"


def test_the_newest_runs_stay_and_zero_keeps_all(wd: Paths) -> None:
    for i in range(5):
        _run(wd, f"{1000 + i}-run")
    assert runs.prune(wd, keep=0) == []
    assert runs.prune(wd, keep=3) == ["1000-run", "1001-run"]
    assert sorted(p.name for p in wd.runs.iterdir()) == ["1002-run", "1003-run", "1004-run"]
    assert (wd.runs / "1004-run" / "prompt.md").read_text() == "prompt\n"
