"""Every file and directory of a work dir, named once (docs/internals.md "Files on disk")."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from looop_py.errors import NotAWorkDir
from looop_py.ids import check_segment
from looop_py.workdir.locate import CONFIG_NAME as CONFIG_NAME  # noqa: PLC0414 - named here too
from looop_py.workdir.locate import locate


@dataclass(frozen=True, slots=True)
class Paths:
    """Where each file of a work dir lives, named once."""

    root: Path

    # -- files a human edits ------------------------------------------------
    @property
    def config(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def playbook(self) -> Path:
        return self.root / "PLAYBOOK.md"

    @property
    def goals(self) -> Path:
        return self.root / "goals"

    @property
    def goals_archive(self) -> Path:
        return self.goals / "archive"

    @property
    def sensors(self) -> Path:
        return self.root / "sensors"

    # -- what looop and its workers write -----------------------------------
    @property
    def snapshots(self) -> Path:
        return self.root / "snapshots"

    @property
    def claims(self) -> Path:
        return self.root / "claims"

    @property
    def sessions(self) -> Path:
        return self.root / "sessions"

    @property
    def rounds(self) -> Path:
        return self.root / "rounds"

    @property
    def memory(self) -> Path:
        return self.root / "memory"

    @property
    def asks(self) -> Path:
        return self.root / "asks"

    @property
    def answers(self) -> Path:
        return self.root / "answers"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def playbook_history(self) -> Path:
        return self.root / "playbook.d"

    @property
    def journal(self) -> Path:
        return self.root / "journal.md"

    @property
    def events(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def state(self) -> Path:
        return self.root / "state"

    # -- state/ ---------------------------------------------------------------
    @property
    def last_world(self) -> Path:
        return self.state / "last-world.json"

    @property
    def config_cache(self) -> Path:
        return self.state / "config-cache.json"

    @property
    def pulse_lock(self) -> Path:
        return self.state / "pulse.lock"

    @property
    def goal_activity(self) -> Path:
        return self.state / "goal-activity.json"

    @property
    def flap(self) -> Path:
        return self.state / "flap.json"

    @property
    def prompt_order(self) -> Path:
        return self.state / "prompt-order.json"

    @property
    def wal(self) -> Path:
        return self.state / "wal.json"

    @property
    def timers(self) -> Path:
        return self.state / "schedules"

    @property
    def loops_index(self) -> Path:
        return self.state / "loops-index.json"

    @property
    def goals_cache(self) -> Path:
        return self.state / "goals-cache.json"

    @property
    def goals_seen(self) -> Path:
        return self.state / "goals-seen.bin"

    @property
    def round_reports(self) -> Path:
        return self.state / "round-reports.json"

    @property
    def loop_schedule(self) -> Path:
        return self.state / "loop-schedule.json"

    @property
    def provenance(self) -> Path:
        return self.state / "provenance.json"

    @property
    def approved(self) -> Path:
        """Approvals a human gave that are still to be carried out (moves/approvals.py)."""
        return self.state / "approved"

    @property
    def error_log(self) -> Path:
        return self.state / "errors.log"

    @property
    def step_failures(self) -> Path:
        return self.state / "step-failures.json"

    # -- per-item helpers -----------------------------------------------------
    def snapshot(self, stem: str) -> Path:
        return self.snapshots / f"{stem}.json"

    def goal(self, goal_id: str) -> Path:
        return self.goals / f"{check_segment(goal_id, 'goal id')}.md"

    def sensor(self, name: str) -> Path:
        return self.sensors / f"{check_segment(name, 'sensor name')}.sh"

    def layout_dirs(self) -> tuple[Path, ...]:
        """The directories `looop init` creates (docs/internals.md "Files on disk")."""
        return (
            self.goals,
            self.goals_archive,
            self.sensors,
            self.snapshots,
            self.claims,
            self.sessions,
            self.rounds,
            self.memory,
            self.asks,
            self.answers,
            self.reports,
            self.state,
            self.runs,
        )


def find_workdir(
    explicit: str | os.PathLike[str] | None, env: Mapping[str, str], cwd: Path
) -> Paths:
    """-C DIR, else $LOOOP_DIR, else the nearest ancestor of cwd holding looop.toml."""
    hint = "run `looop init DIR` to create one, or point at one with `looop -C DIR` or $LOOOP_DIR"
    named = None if explicit is None else os.fspath(explicit)
    root, source, found = locate(named, env, str(cwd))
    if found:
        return Paths(Path(root))
    if source is not None:
        raise NotAWorkDir(f"{root} ({source}) is not a looop work dir: no {CONFIG_NAME}", hint)
    raise NotAWorkDir(f"not inside a looop work dir (no {CONFIG_NAME} in {root} or above)", hint)


def has_entries(directory: Path, suffix: str = "") -> bool:
    """Does `directory` hold anything (ending in `suffix`) besides dotfiles? A cheap peek
    that lets a quiet beat skip a step, and the imports it needs, when there is nothing."""
    try:
        with os.scandir(directory) as it:
            return any(e.name.endswith(suffix) and not e.name.startswith(".") for e in it)
    except FileNotFoundError:
        return False
