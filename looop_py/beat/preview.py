"""`looop sense`: a SENSE and a DIFF with no decide and no commit, nothing saved in state/."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from looop_py import procs
from looop_py.beat.pulse import terminate_cleanly
from looop_py.errors import Busy
from looop_py.locks import PulseLock
from looop_py.sensing.sense import World, load_committed, sense
from looop_py.workdir.context import WorkDir
from looop_py.world import Change, diff


@dataclass(frozen=True)
class Preview:
    """`looop sense`: what SENSE saw and what DIFF would say, nothing decided."""

    world: World
    committed_hash: str | None
    changed: tuple[Change, ...]

    @property
    def would_wake(self) -> bool:
        return self.world.hash != self.committed_hash

    @property
    def failed(self) -> list[str]:
        return [r.stem.removeprefix("sensor-") for r in self.world.readings if not r.ok]

    def to_json(self) -> dict[str, Any]:
        return {
            "world_hash": self.world.hash,
            "committed_hash": self.committed_hash,
            "would_wake": self.would_wake,
            "changed": [c.to_json() for c in self.changed],
            "snapshots": self.world.snapshots,
            "failed": self.failed,
            "sensors": {
                r.stem.removeprefix("sensor-"): {
                    "status": r.status,
                    "ms": round(r.duration_s * 1000, 1),
                }
                for r in self.world.readings
            },
        }


def preview(wd: WorkDir) -> Preview:
    """`looop sense`: a SENSE and a DIFF with no decide and no commit."""
    cfg = wd.config  # no cache: `looop sense` writes nothing to state/
    wd.paths.state.mkdir(exist_ok=True)
    lock = PulseLock(wd.paths.pulse_lock)
    # Sensing writes snapshots, so wait for a running beat rather than race it.
    if not lock.acquire(timeout_s=cfg.sensors.timeout_s + 5):
        raise Busy("a pulse has held the lock for too long", "try again in a minute")
    try:
        with terminate_cleanly():
            world = sense(wd, wd.clock(), persist=False)
    finally:
        procs.kill_running()
        lock.release()
    if cfg.coordination.backend == "files":
        last = load_committed(wd.paths)
    else:  # as a beat there sees it: host-local readings named, the shared commit
        from looop_py.beat import shared  # a shared backend only, as in beat/pulse.py

        world, last = shared.as_committed(wd, world)
    return Preview(world, last.hash, tuple(diff(last.items, world.items)))
