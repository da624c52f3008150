"""state/goals-cache.json: a goal whose full stat is the one a beat read it at is not opened
again; nothing the cache says may hide an edit or change the world's hash."""

from __future__ import annotations

import os
import time
from pathlib import Path

from looop_py.beat import pulse
from looop_py.sensing.sense import sense
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, write_sensor


def _fixed_work_dir(wd: Paths) -> None:
    """Goals with and without frontmatter, one not UTF-8, one empty, one linked, and the
    times put back a day so that each goal is older than the cache's racy window."""
    write_sensor(wd, "s0", 'echo \'{"signal": {"n": 0}, "detail": {"x": 1}}\'\n')
    for g in wd.goals.glob("*.md"):
        g.unlink()
    for i in range(6):
        (wd.goals / f"goal-{i}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    (wd.goals / "fenced.md").write_text("---\non: [s0]\nruntime: shell\n---\n# Fenced\n")
    (wd.goals / "latin.md").write_bytes(b"# caf\xe9\n")
    (wd.goals / "empty.md").write_bytes(b"")
    (wd.root / "notes").mkdir()
    (wd.root / "notes" / "linked.md").write_text("# Linked inside the work dir\n")
    (wd.goals / "linked.md").symlink_to(wd.root / "notes" / "linked.md")
    (wd.root / "PLAYBOOK.md").write_text("# Playbook\n\nBe careful.\n")
    day_ago = time.time() - 86400
    for path in [*wd.goals.iterdir(), wd.root / "notes" / "linked.md"]:
        os.utime(path, (day_ago, day_ago), follow_symlinks=False)


def _world_hash(wd: Paths) -> str:
    return sense(open_wd(wd, clock=lambda: 1_700_000_000.0), 1_700_000_000.0).hash


def test_the_world_hash_of_a_fixed_work_dir_is_what_it_was_before_the_cache(wd: Paths) -> None:
    _fixed_work_dir(wd)
    cold = _world_hash(wd)
    assert cold == PINNED, cold
    pulse.beat(open_wd(wd), force=True)  # the beat fills the cache
    assert _world_hash(wd) == PINNED


PINNED = "xxh3:d082782346a849c09affa435b399b3ac"
