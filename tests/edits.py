"""Edits of goal files that stat caches get wrong, as the hostile tests make them."""

from __future__ import annotations

import os
import time
from pathlib import Path

from looop_py.workdir import goalcache
from looop_py.workdir.paths import Paths
from tests.conftest import wait_for, write_sensor


def edit_in_place(path: Path, text: str) -> None:
    """Write `text` over `path` in place, keeping its inode, size and mtime: only the ctime
    tells, the edit a cache keyed on size and mtime would miss."""
    before = os.stat(path)
    assert len(text.encode()) == before.st_size
    with open(path, "r+", encoding="utf-8") as f:
        f.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def settle(*paths: Path) -> None:
    """Every path's mtime a day back, and its ctime (which no one sets) past the racy window."""
    day_ago = time.time() - 86400
    for path in paths:
        os.utime(path, (day_ago, day_ago), follow_symlinks=False)
    newest = max(p.lstat().st_ctime_ns for p in paths)
    wait_for(lambda: time.time_ns() - newest > goalcache.RACY_NS, what="the racy window")


def goals_dir(wd: Paths, n: int = 40) -> None:
    """goals/ as the goal-side tests start from: `n` plain goals, one fenced goal (a loop on
    sensor s0, which prints a steady signal), all settled past the racy window."""
    write_sensor(wd, "s0", 'echo \'{"signal": {"n": 0}}\'\n')
    for g in wd.goals.glob("*.md"):
        g.unlink()
    for i in range(n):
        (wd.goals / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    (wd.goals / "fenced.md").write_text("---\non: [s0]\nruntime: shell\n---\n# Fenced\n")
    settle(*wd.goals.iterdir(), wd.goals)
