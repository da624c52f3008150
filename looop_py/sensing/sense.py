"""SENSE, and the world the last usable decision committed.

SENSE runs every sensor and probe, writes their snapshots, and reads
PLAYBOOK.md and the goals once: the World it returns carries those bytes, so
the DIFF hashes and the prompt shows exactly the same text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from looop_py import jsonio, procs, world
from looop_py.records import record
from looop_py.sensing import probes, sensors
from looop_py.sensing.probes import Seen
from looop_py.workdir.environ import child_env
from looop_py.workdir.goalfile import GoalFile
from looop_py.workdir.goals import (
    may_remember,
    outside_link,
    read_goals,
    read_playbook_stamped,
    remember,
)
from looop_py.workdir.goals import side as goal_side
from looop_py.workdir.goals import spliced as goal_spliced
from looop_py.workdir.paths import Paths
from looop_py.world import stat_text

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir


# @record: nothing compares these (identity) or assigns to them (mypy); each generated
# method is a full beat's fixed cost at import (records.py).
@record(slots=True)
class World:
    """Everything one SENSE step saw."""

    items: dict[str, str]
    hash: str
    policy: str  # the hash of PLAYBOOK's and the goals' items (world.hashes): cuts a backoff
    readings: tuple[sensors.Reading, ...]
    snapshots: dict[str, dict[str, Any]]  # stem → snapshot, sensors and probes
    probed: Seen  # what the probes found, typed (sessions, asks, goal activity)
    playbook: bytes | None = None  # PLAYBOOK.md as hashed (None: there is none)
    goals: tuple[GoalFile, ...] = ()  # goals/*.md as hashed, by id
    # What SENSE read, by path in the work dir: PLAYBOOK's and each sensor's stat
    # (world.stat_text) while it held still (a goal's is GoalFile.stamp), and for a
    # sensor the (timeout, interval) its header set. The seal takes a file whose survey
    # stat is this one as read: it never reads it twice.
    read: dict[str, tuple[str, float, float]] = field(default_factory=dict)


@record(slots=True)
class Committed:
    """The world as of the last usable decision."""

    hash: str | None = None
    items: dict[str, str] = field(default_factory=dict)
    at: float | None = None
    action: str | None = None  # the move that decision made
    next_wake: float | None = None  # a durable next_interval_s: re-decide at this time


def sense(
    wd: WorkDir,
    now: float,
    *,
    persist: bool = True,
    ran: Mapping[str, procs.Result] | None = None,
) -> World:
    """Run sensors and probes, write every snapshot, hash the world.

    `persist=False` (`looop sense`) still writes the snapshots it reads but
    nothing under state/: the probes leave the loop index and schedule book alone.
    `ran`: sensor runs a quiet attempt already made this beat (beat/quiet.py).
    """
    cfg = wd.config
    wd.paths.snapshots.mkdir(exist_ok=True)
    found, refused = _inside(wd, sensors.discover(wd.paths, cfg.sensors.timeout_s))
    readings = sensors.sense(
        wd.paths,
        found,
        env=child_env(wd.paths, config=cfg),
        cap=cfg.sensors.max_bytes,
        concurrency=cfg.sensors.concurrency,
        now=now,
        ran=ran,
    )
    for reading in refused:
        jsonio.write_json_if_changed(wd.paths.snapshot(reading.stem), reading.snapshot)
    readings = sorted([*readings, *refused], key=lambda r: r.stem)
    goals = tuple(read_goals(wd, save=persist))
    snapshots = {r.stem: r.snapshot for r in readings}
    found_by_probes, probed = probes.run_probes(wd, now, goals=goals, persist=persist)
    for stem, snap in found_by_probes:
        jsonio.write_json_if_changed(wd.paths.snapshot(stem), snap)
        snapshots[stem] = snap
    playbook, playbook_stat = read_playbook_stamped(wd)
    signals = ((stem, snap.get("signal")) for stem, snap in snapshots.items())
    side = goal_side(wd) or goal_spliced(wd)  # goals/ as recorded, or spliced from the record
    if side is None:
        items = world.build_items_digested(playbook, ((g.id, g.digest) for g in goals), signals)
        hashes = world.hashes(items)
        if persist and may_remember(wd, goals):
            remember(wd, goals)
    else:  # goals/ as recorded (workdir/goalside.py): its goal items, already framed
        first = world.build_items_digested(playbook, (), ())
        rest = world.build_items_digested(None, (), signals)
        items = {**first, **side.items, **rest}
        hashes = world.hashes_framed(first, side.section, rest)
        if persist and may_remember(wd, goals):  # spliced, and the listing may vouch
            remember(wd, goals)
    read = {}  # goals keep their own stamp (GoalFile.stamp): no second table of 10,000
    if playbook_stat is not None:
        read["PLAYBOOK.md"] = (stat_text(playbook_stat), 0.0, 0.0)
    for sensor in found:
        if sensor.head is not None:
            head = (stat_text(sensor.head), sensor.timeout_s, sensor.interval_s or 0.0)
            read[f"sensors/{sensor.name}.sh"] = head
    return World(
        items,
        *hashes,
        tuple(readings),
        snapshots,
        probed,
        playbook,
        goals,
        read,
    )


def _inside(
    wd: WorkDir, found: list[sensors.Sensor]
) -> tuple[list[sensors.Sensor], list[sensors.Reading]]:
    """The sensors that may run, and an error reading for each that links out of the work dir."""
    whole_dir = outside_link(wd, wd.paths.sensors)
    ok, refused = [], []
    for sensor in found:
        why = whole_dir or outside_link(wd, sensor.path)
        if why is None:
            ok.append(sensor)
            continue
        snap = {"signal": {"error": "outside-link"}, "detail": {"message": why}}
        refused.append(sensors.Reading(sensor.stem, snap, 0.0))
    return ok, refused


def load_committed(paths: Paths) -> Committed:
    """The last committed world; a file that does not fit is a cache: nothing committed.

    The next beat then sees every item as new, decides, and writes a good one.
    """
    return parse_committed(jsonio.read_object(paths.last_world))


def parse_committed(data: Any) -> Committed:
    """A committed world record as load_committed reads it (from a file or a backend)."""
    if not isinstance(data, dict):
        return Committed()
    items = data.get("items")
    if not isinstance(items, dict) or not set(map(type, items.values())) <= {str}:
        return Committed()
    digest = data.get("hash")
    return Committed(
        digest if isinstance(digest, str) else None,
        dict(items),
        jsonio.number(data.get("committed_at")),
        _text(data.get("action")),
        jsonio.number(data.get("next_wake")),
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def committed_record(
    seen: World, now: float, action: str | None, next_wake: float | None
) -> dict[str, Any]:
    """The committed world as stored (state/last-world.json, or a shared backend's key)."""
    return {
        "v": 1,
        "hash": seen.hash,
        "items": seen.items,
        "committed_at": now,
        "action": action,
        "next_wake": next_wake,
    }


def commit(
    paths: Paths, seen: World, now: float, action: str | None, next_wake: float | None
) -> Committed:
    """Write the world as committed by this decision; returns what load_committed reads back."""
    jsonio.write_json(paths.last_world, committed_record(seen, now, action, next_wake))
    return Committed(seen.hash, dict(seen.items), now, action, next_wake)
