"""What `looop status` and `looop why` report, as typed views (cli/render.py renders them)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from looop_py import jsonio, world
from looop_py.asks import mailbox
from looop_py.beat import notify
from looop_py.beat.decide import policy_hash
from looop_py.beat.result import BeatOutcome
from looop_py.beat.shared import Standing, down_since, standing
from looop_py.errors import CorruptFile, unreachable
from looop_py.locks import PulseLock
from looop_py.loops.views import held_loops
from looop_py.sensing.sense import load_committed
from looop_py.spend import limits
from looop_py.workdir import journal
from looop_py.workdir.context import WorkDir
from looop_py.workdir.goals import goal_paths, read_goals, read_playbook
from looop_py.workdir.paths import Paths
from looop_py.world import Change, is_error_signal


def _count_entries(directory: os.PathLike[str], *, dirs: bool = False, suffix: str = "") -> int:
    try:
        with os.scandir(directory) as it:
            return sum(
                1
                for e in it
                if not e.name.startswith(".")
                and (e.is_dir() if dirs else e.name.endswith(suffix) and e.is_file())
            )
    except FileNotFoundError:
        return 0


@dataclass(frozen=True)
class SensorHealth:
    ok: list[str]
    failed: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "failed": self.failed}


def sensor_health(paths: Paths) -> SensorHealth:
    """Which sensors read ok and which failed, from their latest snapshots."""
    ok: list[str] = []
    failed: list[str] = []
    try:
        entries = sorted(os.scandir(paths.snapshots), key=lambda e: e.name)
    except FileNotFoundError:
        entries = []
    for entry in entries:
        if not (entry.name.startswith("sensor-") and entry.name.endswith(".json")):
            continue
        name = entry.name.removeprefix("sensor-").removesuffix(".json")
        try:
            snap = jsonio.read_json(paths.snapshot(entry.name.removesuffix(".json")), {})
        except (CorruptFile, OSError):
            snap = {"signal": {"error": "unreadable"}}
        signal = snap.get("signal") if isinstance(snap, dict) else None
        (failed if is_error_signal(signal) else ok).append(name)
    return SensorHealth(ok, failed)


@dataclass(frozen=True)
class BackoffView:
    fails: int  # failed decides in a row
    retry_in_s: int
    reason: str | None

    def to_json(self) -> dict[str, Any]:
        return {"fails": self.fails, "retry_in_s": self.retry_in_s, "reason": self.reason}


@dataclass(frozen=True)
class LimitsView:
    """Every spend limit and guard, as it stands now."""

    blocked: str | None  # why the decider would not be called now, if it would not
    decides_last_hour: int
    decides_per_hour: int
    tokens_today: int
    daily_tokens: int
    usd_today: float
    daily_usd: float
    unmetered_in_a_row: int
    backoff: BackoffView | None
    flapping: list[str]
    next_wake: float | None
    pending_asks: int
    # today's spend by source (decider, loop:NAME, workers): {"tokens", "usd"}
    by_source: dict[str, dict[str, Any]] = field(default_factory=dict)
    cache_hit_ratio: float | None = None  # of today's prompt tokens, the share a cache served
    # today's spend by runtime (claude, codex, llm …): {"tokens", "usd"}, and the tokens of
    # calls whose price nobody knows, by runtime (they hold a daily USD budget)
    by_runtime: dict[str, dict[str, Any]] = field(default_factory=dict)
    unpriced: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "blocked": self.blocked,
            "decides_last_hour": self.decides_last_hour,
            "decides_per_hour": self.decides_per_hour,
            "tokens_today": self.tokens_today,
            "daily_tokens": self.daily_tokens,
            "usd_today": self.usd_today,
            "daily_usd": self.daily_usd,
            "unmetered_in_a_row": self.unmetered_in_a_row,
            "backoff": self.backoff.to_json() if self.backoff else None,
            "flapping": self.flapping,
            "next_wake": self.next_wake,
            "pending_asks": self.pending_asks,
            "by_source": self.by_source,
            "by_runtime": self.by_runtime,
            "unpriced": self.unpriced,
            "cache_hit_ratio": self.cache_hit_ratio,
        }


def limits_now(wd: WorkDir, now: float) -> LimitsView:
    """Every spend limit and guard, as it stands now."""
    cfg = wd.config
    lim = cfg.limits
    led = limits.load(wd)
    playbook = read_playbook(wd)
    policy = policy_hash(
        world.build_items_digested(playbook, ((g.id, g.digest) for g in read_goals(wd)), ())
    )
    spend = limits.spend_today(led.spend, now)
    b = led.backoff
    retry = b.at + limits.backoff_delay(b.fails, lim.backoff_base_s, lim.backoff_max_s) - now
    wake = load_committed(wd.paths).next_wake
    return LimitsView(
        blocked=limits.decide_block(led, now=now, policy=policy, limits=lim),
        decides_last_hour=sum(1 for t in led.decides if now - t < limits.HOUR),
        decides_per_hour=lim.decides_per_hour,
        tokens_today=spend.tokens,
        daily_tokens=lim.daily_tokens,
        usd_today=spend.usd,
        daily_usd=lim.daily_usd,
        unmetered_in_a_row=spend.unmetered,
        backoff=BackoffView(b.fails, max(0, round(retry)), b.reason) if b.fails else None,
        flapping=limits.flapping(limits.load_flap(wd), lim.flap_streak),
        next_wake=wake if isinstance(wake, int | float) else None,
        pending_asks=len(mailbox.pending(wd)),
        by_source={
            src: {"tokens": int(row.get("tokens", 0)), "usd": float(row.get("usd", 0.0))}
            for src, row in sorted(spend.by_source.items(), key=lambda kv: _source_rank(kv[0]))
        },
        cache_hit_ratio=spend.cache_hit_ratio(),
        by_runtime={
            rt: {"tokens": int(row.get("tokens", 0)), "usd": float(row.get("usd", 0.0))}
            for rt, row in sorted(spend.by_runtime.items())
        },
        unpriced=dict(sorted(spend.unpriced.items())),
    )


def _source_rank(source: str) -> tuple[int, str]:
    """The decider first, then each loop, then other workers."""
    return (0 if source == "decider" else 1 if source.startswith("loop:") else 2, source)


@dataclass(frozen=True)
class LastBeat:
    """The last `beat` event of events.jsonl, as status shows it."""

    ts: str | None
    outcome: BeatOutcome | None
    ms: float | None
    world_hash: str | None = None
    prev_hash: str | None = None
    forced: bool = False
    reason: str | None = None
    move: Any = None
    changed: tuple[Change, ...] = ()
    forced_by: str | None = None  # force | next-interval | noop-ttl: a wake with no change

    @classmethod
    def from_event(cls, event: dict[str, Any] | None) -> LastBeat | None:
        if event is None:
            return None
        try:
            outcome: BeatOutcome | None = BeatOutcome(str(event.get("outcome")))
        except ValueError:
            outcome = None  # an event from a looop that knew other outcomes
        raw = event.get("changed")
        changed = tuple(
            Change(str(c.get("item")), _str_or_none(c.get("old")), _str_or_none(c.get("new")))
            for c in (raw if isinstance(raw, list) else ())
            if isinstance(c, dict)
        )
        ms = event.get("ms")
        return cls(
            ts=event.get("ts"),
            outcome=outcome,
            ms=ms if isinstance(ms, int | float) else None,
            world_hash=event.get("world_hash"),
            prev_hash=event.get("prev_hash"),
            forced=bool(event.get("forced")),
            reason=event.get("reason"),
            move=event.get("move"),
            changed=changed,
            forced_by=_str_or_none(event.get("forced_by")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ts": self.ts,
            "outcome": self.outcome,
            "world_hash": self.world_hash,
            "prev_hash": self.prev_hash,
            "forced": self.forced,
            "reason": self.reason,
            "ms": self.ms,
            "move": self.move,
        }


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class FailedSteps:
    """The steps the last beat survived a bug in; cleared by the next clean beat."""

    steps: tuple[str, ...]
    at: str | None
    log: str  # where their tracebacks are

    def to_json(self) -> dict[str, Any]:
        return {"steps": list(self.steps), "at": self.at, "log": self.log}


def failed_steps(paths: Paths) -> FailedSteps | None:
    record = jsonio.read_object(paths.step_failures)
    if record is None or not isinstance(record.get("steps"), list):
        return None
    at = record.get("at")
    return FailedSteps(
        tuple(str(s) for s in record["steps"]),
        journal.iso(at) if isinstance(at, int | float) and 0 < at < 1e11 else None,
        str(paths.error_log),
    )


@dataclass(frozen=True)
class StatusView:
    work_dir: str
    pulse_running: bool
    last_beat: LastBeat | None
    world_hash: str | None
    committed_at: float | None
    sensors: SensorHealth
    limits: LimitsView | None  # None: the shared backend (and its ledger) is out of reach
    goals: int
    sessions: int
    claims: int
    committed_error: str | None = None  # last-world.json could not be read (a cache: rebuilt)
    failed_steps: FailedSteps | None = None  # a bug the last beat survived, until a clean one
    shared: Standing | None = None  # a shared backend (etcd): this host, the pulse
    notify_failing: int = 0  # events the notify hook has not taken yet (retried every beat)
    # The shared backend is out of reach: what is shown is this host's local mirror.
    degraded: Degraded | None = None
    held_loops: dict[str, str] | None = None  # loop -> "held since T: waiting on ask X"

    def to_json(self) -> dict[str, Any]:
        return {
            "work_dir": self.work_dir,
            "pulse_running": self.pulse_running,
            "last_beat": self.last_beat.to_json() if self.last_beat else None,
            "world_hash": self.world_hash,
            "committed_at": self.committed_at,
            "sensors": self.sensors.to_json(),
            "limits": self.limits.to_json() if self.limits else None,
            "counts": {"goals": self.goals, "sessions": self.sessions, "claims": self.claims},
            "failed_steps": self.failed_steps.to_json() if self.failed_steps else None,
            "coordination": self.shared.to_json() if self.shared else {"backend": "files"},
            "held_loops": self.held_loops or {},
            "notify_failing": self.notify_failing,
            "degraded": self.degraded.to_json() if self.degraded else None,
        }


@dataclass(frozen=True)
class Degraded:
    """`looop status` cut off from the shared backend: the local mirror, and how stale."""

    reason: str
    mirror_age_s: float | None  # since the committed world was mirrored here (None: never)
    since: float | None  # when a beat of this host first found the backend out of reach

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "mirror_age_s": None if self.mirror_age_s is None else round(self.mirror_age_s),
            "since": self.since,
        }


def status(wd: WorkDir) -> StatusView:
    error = None
    try:
        jsonio.read_json(wd.paths.last_world, None)
    except CorruptFile as exc:
        error = exc.message
    committed = load_committed(wd.paths)
    shared = standing(wd)
    claims = _count_entries(wd.paths.claims, suffix=".json")
    if shared is not None and shared.committed is not None:
        committed, claims = shared.committed, shared.claims  # every host's, not this mirror
    now = time.time()
    degraded = None
    if shared is not None and shared.error is not None:  # the rest from this host's mirror
        try:
            age: float | None = max(0.0, now - wd.paths.last_world.stat().st_mtime)
        except OSError:
            age = None  # nothing mirrored here yet
        degraded = Degraded(shared.error, age, down_since(wd.paths))
    return StatusView(
        work_dir=str(wd.paths.root),
        pulse_running=PulseLock(wd.paths.pulse_lock).held_elsewhere(),
        last_beat=LastBeat.from_event(journal.last_event(wd.paths, "beat")),
        world_hash=committed.hash,
        committed_at=committed.at,
        sensors=sensor_health(wd.paths),
        limits=None if degraded else limits_now(wd, now),
        goals=len(goal_paths(wd)),
        sessions=_count_entries(wd.paths.sessions, dirs=True),
        claims=claims,
        committed_error=error,
        failed_steps=failed_steps(wd.paths),
        shared=shared,
        notify_failing=notify.failing_count(wd.paths),
        degraded=degraded,
        held_loops=None if degraded else held_loops(wd),  # rounds live on the shared shelf
    )


@dataclass(frozen=True)
class WhyView:
    """Why the last beat skipped or woke: its outcome and every changed item, old → new."""

    explanation: str
    last: LastBeat | None = None
    limits: LimitsView | None = None
    changed: tuple[Change, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        if self.last is None:
            return {"outcome": None, "explanation": self.explanation}
        return {
            "ts": self.last.ts,
            "outcome": self.last.outcome,
            "world_hash": self.last.world_hash,
            "prev_hash": self.last.prev_hash,
            "explanation": self.explanation,
            "forced_by": self.last.forced_by,
            "changed": [c.to_json() for c in self.changed],
            "limits": self.limits.to_json() if self.limits else None,
        }


# Why a beat woke with nothing changed, by its event's forced_by (beat/pulse.py why_decide).
WAKES = {
    "force": "forced with --force; nothing had changed",
    "next-interval": (
        "the decider's timer came due (the next_interval_s it asked for last time);"
        " nothing had changed"
    ),
    "noop-ttl": (
        "the last decision was noop and [limits] noop_ttl_s passed, so the decider was"
        " asked again; nothing had changed"
    ),
}


def wake_cause(last: LastBeat) -> str:
    """What woke the beat: the changed items, else what forced it. Pure."""
    if last.changed:
        return f"{len(last.changed)} item(s) changed since the last decision"
    if last.forced_by is not None:
        return WAKES.get(last.forced_by, f"woken by {last.forced_by}; nothing had changed")
    if last.forced:
        return WAKES["force"]
    return "nothing had changed"


def explain(last: LastBeat) -> str:
    """One sentence on why this beat did what it did. Pure."""
    match last.outcome:
        case BeatOutcome.SKIPPED:
            return "the world hash is unchanged since the last decision, so no decider was called"
        case BeatOutcome.LOCKED:
            return "another pulse held the lock, so this one stepped aside"
        case BeatOutcome.HELD:
            return f"{wake_cause(last)}, but the decider was not called: {last.reason}"
        case BeatOutcome.FAILED:
            return f"{wake_cause(last)}; the beat failed: {last.reason}"
        case BeatOutcome.DECIDED:
            return wake_cause(last)
        case None:
            return f"the last beat ended in a way this looop does not know ({last.reason})"
        case _:
            unreachable(last.outcome)


def why(wd: WorkDir) -> WhyView:
    last = LastBeat.from_event(journal.last_event(wd.paths, "beat"))
    if last is None:
        return WhyView("no beat has run yet; run `looop pulse`")
    return WhyView(explain(last), last, limits_now(wd, time.time()), last.changed)
