"""`looop doctor`: do the pieces a user configured work together? One line each, with a fix.

Every check is a small function returning a Check; none changes anything in
the work dir but a probe file it removes at once. `offline` skips the one check
that costs a model call (the decider round trip).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from looop_py.coord import base, choose
from looop_py.coord.choose import open_workdir
from looop_py.errors import LooopError
from looop_py.locks import PulseLock
from looop_py.ops import cron
from looop_py.ops.check import Check, Verdict
from looop_py.ops.programs import decider_program, runtime
from looop_py.workdir import environ, journal
from looop_py.workdir.config import Config
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths

MIN_FREE_BYTES = 200 * 1024 * 1024
MAX_SKEW_S = 5.0  # the file system's clock against this machine's
STALE_BEAT_S = 15 * 60  # a scheduled pulse should have beaten within this
METERED = ("openai", "anthropic", "command")  # backends that spend money per decide


@dataclass(frozen=True)
class Report:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.verdict is not Verdict.FAIL for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [c.to_json() for c in self.checks]}


def diagnose(paths: Paths, *, offline: bool = False, now: float | None = None) -> Report:
    """Run every check; a check that cannot even run is a failed check, not a crash.

    A door of its own: it opens the work dir itself, so a broken looop.toml is a
    failed check instead of the error every other command stops at."""
    now = time.time() if now is None else now
    checks: list[Check] = [work_dir(paths), disk_space(paths), clock_skew(paths)]
    try:
        wd = open_workdir(paths)
    except LooopError as exc:
        checks.append(Check("config", Verdict.FAIL, str(exc).splitlines()[0], exc.hint))
        return Report(checks)
    try:
        return Report(checks + _checks(wd, offline=offline, now=now))
    finally:
        wd.close()


def _checks(wd: WorkDir, *, offline: bool, now: float) -> list[Check]:
    checks: list[Check] = []
    cfg = wd.config
    checks.append(Check("config", Verdict.OK, f"{wd.paths.config} is valid"))
    # Programs are looked up as the cron job will (its PATH in state/cron.env), once installed.
    job = cron.read_env(wd.paths).get("PATH")
    steps: list[Callable[[], Check]] = [
        lambda: decider(wd, offline=offline, now=now),
        lambda: budget(cfg),
        lambda: pricing(cfg),
        *(
            lambda name=name: runtime(cfg, name, wd.paths.root, job)
            for name in _runtimes_in_use(cfg)
        ),
        lambda: decider_program(cfg, job),
        lambda: scheduled(wd.paths, now),
        lambda: pulse_lock(wd.paths, cfg, now),
        lambda: coordination(wd, now),
        lambda: scrubbed(cfg),
    ]
    for step in steps:
        try:
            checks.append(step())
        except Exception as exc:  # a check must never take the others down
            checks.append(Check("doctor", Verdict.FAIL, f"a check broke: {exc!r}"))
    return checks


# -- the checks ------------------------------------------------------------------------------


def scrubbed(cfg: Config) -> Check:
    """The variables of this environment no child gets ([env] scrub, keep)."""
    names = sorted(environ.secret_names(os.environ, cfg))
    if not names:
        return Check("secrets", Verdict.OK, "no secret variables in this environment")
    return Check(
        "secrets",
        Verdict.OK,
        f"children do not get: {', '.join(names)}",
        "let one through with [env] keep, or to one runtime with [runtimes.NAME] env",
    )


def work_dir(paths: Paths) -> Check:
    missing = [d.name for d in paths.layout_dirs() if not d.is_dir()]
    if missing:
        return Check(
            "work dir", Verdict.FAIL, f"missing: {', '.join(missing)}", f"looop init {paths.root}"
        )
    unwritable = [d.name for d in (paths.root, paths.state) if not os.access(d, os.W_OK)]
    if unwritable:
        return Check(
            "work dir",
            Verdict.FAIL,
            f"cannot write to {', '.join(unwritable)}",
            "run looop as the user who owns the work dir",
        )
    return Check("work dir", Verdict.OK, f"{paths.root} is complete and writable")


def disk_space(paths: Paths) -> Check:
    free = shutil.disk_usage(paths.root).free
    text = f"{free / 1024**3:.1f} GiB free"
    if free < MIN_FREE_BYTES:
        return Check("disk", Verdict.FAIL, text, "free some space: snapshots and state are tiny")
    return Check("disk", Verdict.OK, text)


def clock_skew(paths: Paths) -> Check:
    """Ages and cadences compare the clock with file times; a skewed mount breaks both."""
    paths.state.mkdir(exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=paths.state, prefix=".doctor-") as probe:
        skew = os.fstat(probe.fileno()).st_mtime - time.time()
    if abs(skew) > MAX_SKEW_S:
        return Check(
            "clock",
            Verdict.FAIL,
            f"the file system's clock is {skew:+.0f} s off this machine's",
            "sync both clocks (NTP) or keep the work dir on a local disk",
        )
    return Check("clock", Verdict.OK, f"file times agree with the clock ({skew:+.2f} s)")


def decider(wd: WorkDir, *, offline: bool, now: float) -> Check:
    cfg = wd.config
    backend = cfg.decider.backend
    if backend in ("rules", "noop"):
        return Check("decider", Verdict.OK, f"{backend}: offline, nothing to reach")
    if offline:
        return Check("decider", Verdict.OK, f"{backend}: not called (--offline)")
    from looop_py.deciders.check import run_test  # a real round trip: only when asked for

    found = run_test(wd, now)
    if found.ok:
        return Check("decider", Verdict.OK, f"{backend} answered a valid move in {found.ms} ms")
    why = found.error or f"answered an invalid move: {found.invalid}"
    return Check("decider", Verdict.FAIL, f"{backend}: {why}", found.hint or "looop decider test")


def budget(cfg: Config) -> Check:
    backend, lim = cfg.decider.backend, cfg.limits
    if backend not in METERED:
        return Check("budget", Verdict.OK, f"{backend} costs nothing per decide")
    if lim.daily_tokens <= 0 and lim.daily_usd <= 0:
        return Check(
            "budget",
            Verdict.WARN,
            f"{backend} is metered and no daily budget is set",
            "set [limits] daily_tokens or daily_usd in looop.toml",
        )
    parts = [f"{lim.daily_tokens} tokens"] if lim.daily_tokens > 0 else []
    parts += [f"${lim.daily_usd:g}"] if lim.daily_usd > 0 else []
    return Check("budget", Verdict.OK, f"at most {' and '.join(parts)} a day")


def pricing(cfg: Config) -> Check:
    """Whether daily_usd can be kept: what each metered decider and runtime in use costs
    (reported, configured, built in or unknown), and what happens to an unknown price."""
    from looop_py.spend import prices  # only this check prices anything

    lim = cfg.limits
    if lim.daily_usd <= 0:
        return Check("prices", Verdict.OK, "no daily_usd budget: prices only inform spend")
    unknown: list[str] = []
    if cfg.decider.backend in METERED and prices.for_decider(cfg.decider) is None:
        unknown.append(f"decider ({prices.decider_runtime(cfg.decider)})")
    for name in _runtimes_in_use(cfg):
        rc = cfg.runtimes.get(name)
        stream = rc.usage if rc is not None and rc.usage else name
        if name != "shell" and prices.for_runtime(cfg, name, stream) is None:
            unknown.append(f"runtime {name}")
    if not unknown:
        return Check("prices", Verdict.OK, "every metered decider and runtime in use has a price")
    named = ", ".join(unknown)
    if lim.unpriced_usd_per_mtok > 0:
        return Check(
            "prices",
            Verdict.WARN,
            f"no price for {named}: its calls count at the worst case,"
            f" ${lim.unpriced_usd_per_mtok:g} per million tokens, against daily_usd",
            "set usd_per_mtok_in and usd_per_mtok_out for it in looop.toml",
        )
    return Check(
        "prices",
        Verdict.WARN,
        f"no price for {named}: once it reports tokens without a cost, daily_usd holds"
        " every loop (and `looop status` names the missing price)",
        "set usd_per_mtok_in and usd_per_mtok_out for it, or [limits] unpriced_usd_per_mtok",
    )


def _runtimes_in_use(cfg: Config) -> list[str]:
    return sorted({cfg.workers.default_runtime, *cfg.runtimes})


def scheduled(paths: Paths, now: float) -> Check:
    last = journal.last_event(paths, "beat")
    ts = last.get("ts") if last else None
    when = f"last beat {ts}" if ts else "no beat yet"
    try:
        entry = cron.status(paths)
    except LooopError as exc:
        return Check("schedule", Verdict.WARN, f"{exc.message}; {when}", exc.hint)
    if entry.installed is None:
        return Check(
            "schedule",
            Verdict.WARN,
            f"no crontab line runs this work dir's pulse; {when}",
            f"looop -C {paths.root} cron install",
        )
    if not entry.up_to_date:
        return Check(
            "schedule",
            Verdict.WARN,
            f"the crontab line is out of date; {when}",
            f"looop -C {paths.root} cron install",
        )
    age = _age_s(last, now)
    if age is not None and age > STALE_BEAT_S:
        return Check(
            "schedule",
            Verdict.FAIL,
            f"scheduled in cron, but {when} ({age / 60:.0f} min ago)",
            "is cron running? (service cron status); see state/errors.log",
        )
    return Check("schedule", Verdict.OK, f"in the crontab; {when}")


def _age_s(event: dict[str, Any] | None, now: float) -> float | None:
    t = journal.from_iso(event.get("ts")) if event else None
    return None if t is None else now - t


def pulse_lock(paths: Paths, cfg: Config, now: float) -> Check:
    """The flock is released whatever way its holder dies; a pulse holding it too long hangs."""
    if not PulseLock(paths.pulse_lock).held_elsewhere():
        return Check("pulse lock", Verdict.OK, "free")
    longest = cfg.sensors.timeout_s + cfg.decider.timeout_s + 120
    age = _age_s(journal.last_event(paths, "beat"), now)
    if age is not None and age > longest:
        return Check(
            "pulse lock",
            Verdict.FAIL,
            f"held by a pulse that has run for over {longest:.0f} s",
            "find it with `pgrep -af 'looop.*pulse'` and end it; the lock goes with it",
        )
    return Check("pulse lock", Verdict.OK, "held by a pulse running now")


COMPACT_AFTER = 100_000  # etcd revisions kept uncompacted before doctor warns


def coordination(wd: WorkDir, now: float) -> Check:
    """On a shared backend: does it answer, with a quorum, and who holds the pulse?"""
    cfg = wd.config
    c = cfg.coordination
    if c.backend == "files":
        return Check("coordination", Verdict.OK, "files: this machine only")

    started = time.monotonic()
    try:
        coord = choose.coordinator(wd)
        view = coord.get(base.PULSE, now)
    except LooopError as exc:
        return Check("coordination", Verdict.FAIL, f"{c.backend}: {exc.message}", exc.hint)
    ms = (time.monotonic() - started) * 1000
    pulse = "pulse free"
    if view is not None and view.live and view.claim is not None:
        pulse = f"pulse held by {view.claim.host or '?'} (epoch {view.claim.epoch})"
    where = f"{c.backend} at {', '.join(c.endpoints)}, prefix {c.prefix}"
    said = f"{where}: answered in {ms:.0f} ms; host {coord.host}; {pulse}"
    client = getattr(coord, "client", None)
    ends = getattr(client, "endpoints", None)
    if ends is None:
        return Check("coordination", Verdict.OK, said)
    answers = ends()
    quiet = [f"{url} ({why})" for url, why, _ in answers if why is not None]
    said += "; endpoints: " + ", ".join(
        f"{url} {'answers' if why is None else 'does not answer'}" for url, why, _ in answers
    )
    if quiet:
        return Check(
            "coordination",
            Verdict.WARN,
            said,
            f"check {'; '.join(quiet)}: the others carry on while a quorum answers",
        )
    revision = max(
        (int(st.get("header", {}).get("revision", 0)) for _, why, st in answers if why is None),
        default=0,
    )
    said += f"; revision {revision}"
    claims = f"{c.prefix.rstrip('/')}/claims/"
    if revision > COMPACT_AFTER and client is not None and client.never_compacted(claims):
        return Check(
            "coordination",
            Verdict.WARN,
            said + ", never compacted",
            "run etcd with --auto-compaction-mode=periodic --auto-compaction-retention=1h"
            " (looop help coordination: Compaction)",
        )
    return Check("coordination", Verdict.OK, said)
