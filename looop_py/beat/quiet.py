"""The quiet beat: the seal proves nothing changed, so nothing is read or parsed.

Most beats find the world as the last one left it. A plain `looop pulse` first
reads the seal the last full beat wrote (sensing/seal.py), takes the lock,
checks what the sensors' runs rest on (the config and their scripts), starts
them as a full beat would, surveys the same files (stat calls, no reads) while
they run — on 2 cores the stat calls hide behind the sensors — and digests
what they printed. When the survey and every digest match
and no time in the seal has come, the world hash is the sealed one: the beat
is skipped without reading a goal, parsing JSON or loading the rest of looop,
and appends the event line a skipped beat appends. Anything else — an edited
goal, a new worker, one different signal, a damaged seal — hands the lock and
the sensors' raw runs to the full beat (beat/pulse.py), so no sensor runs
twice and the full beat decides exactly as it always did. A sensor whose output
changed while its signal held (a churning detail) is not a change: its one
output is parsed (sensing/steady.py, the json module: loaded only then), its
snapshot rewritten and the seal updated, and the beat stays quiet.

On etcd the seal also holds the fingerprint of the loop's shared keys, and
one transaction proves them unchanged (coord/etcdseal.py); the quiet beat
there neither takes the pulse nor reads a record.

At import it loads nothing a quiet beat does not use: os, time, select, fcntl
and xxhash (through seal, procs, locks and world); the etcd client only when
the seal says etcd.
"""

from __future__ import annotations

import os
import sys
import time

from looop_py import logfile, orphans, procs
from looop_py.locks import PulseLock
from looop_py.sensing import seal, survey
from looop_py.sensing.seal import Sealed
from looop_py.workdir.locate import locate
from looop_py.world import stat_text

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

EVENTS = "events.jsonl"
PULSE_LOCK = "state/pulse.lock"
FLAP = "state/flap.json"


class Handover:
    """What a quiet attempt hands the full beat: the pulse lock it holds, the raw runs of
    the sensors it already ran (by sensor name) and when it started (the beat's `ms`
    counts from there: the sensors ran in it)."""

    __slots__ = ("lock", "runs", "started")

    def __init__(self, lock: PulseLock, runs: dict[str, procs.Result], started: float) -> None:
        self.lock = lock
        self.runs = runs
        self.started = started


def find_root(explicit: str | None) -> str | None:
    """The work dir as workdir.paths.find_workdir finds it; None when there is none (the
    full path says why)."""
    root, _, found = locate(explicit, os.environ, os.getcwd())
    return root if found else None


def attempt(
    root: str, *, quiet: bool, goals: Callable[[], survey.Listed | None] | None = None
) -> int | Handover | None:
    """Skip the beat if the seal proves nothing changed: the exit code. Else a Handover
    (the lock, the sensors' runs) for the full beat, or None when it must start afresh.
    `goals`: goals/ as a watch vouches for it (`looop up`, ops/goalwatch.py), else listed."""
    sealed = seal.read(root)
    if sealed is None:
        return None
    started = time.monotonic()
    now = time.time()
    if now >= sealed.until or seal.env_key(os.environ) != sealed.env:
        return None
    lock = PulseLock(os.path.join(root, PULSE_LOCK))
    if not lock.acquire():
        return None  # the full beat reports `locked`
    try:
        sensing = survey.sensing_part(sealed.survey)
        if survey.sensing(root) != sensing or not _holders_alive(root, sealed):
            lock.release()
            return None
        if sealed.shared is not None and not _shared_holds(sealed.shared):
            return Handover(lock, {}, started)  # the full beat reads what changed (or says why not)
        # The rest, taken while the sensors run (the config and sensors/ were just checked:
        # an edit since shows in what a sensor prints, or on the next beat, as the seal
        # keeps the stat they had).
        rest = survey.besides_sensing(sealed.survey)
        surveyed: list[bool] = []
        runs, ran, cached = _run_sensors(
            root, sealed, now, lambda: surveyed.append(_survey(root, goals) == rest)
        )
    except BaseException:
        procs.kill_running()
        lock.release()
        raise
    if surveyed != [True]:
        return Handover(lock, runs, started)  # ran as a full beat would run them: the config held
    changed = {n: t for n, t, _, d, _ in ran if seal.raw_digest(runs[n], t, sealed.cap) != d}
    try:
        steady = not changed or _steady(root, sealed, runs, changed)
    except BaseException:
        lock.release()
        raise
    if not steady:
        return Handover(lock, runs, started)
    try:
        _record(root, sealed, runs, cached, started)
    finally:
        lock.release()
    if not quiet and sys.stdout.isatty():
        sys.stdout.write(_line(sealed, started) + "\n")
    return 0


def _survey(root: str, goals: Callable[[], survey.Listed | None] | None) -> list[str]:
    return survey.survey(root, listed=goals() if goals else None, sensing=False)


def _shared_holds(line: str) -> bool:
    """On etcd: the loop's shared keys are as the sealed beat read them, asked in one
    transaction (coord/etcdseal.py); False when they changed or etcd cannot be asked."""
    from looop_py.coord import etcdseal  # a seal on etcd only: socket and json
    from looop_py.errors import LooopError

    try:
        return etcdseal.holds(etcdseal.Fingerprint.from_line(line))
    except (LooopError, ValueError, KeyError, TypeError):
        return False  # unreachable, no password, a damaged line: the full beat says which


def _holders_alive(root: str, sealed: Sealed) -> bool:
    """Every sealed claim's holder, ask's waiter and live worker still runs (a dead one's
    record is a full beat's work), and no live worker's output log went back in time
    (its health, `stuck` from that mtime on, would change sooner than the seal says)."""
    for rel, ns in sealed.outputs:
        try:
            if os.lstat(os.path.join(root, rel)).st_mtime_ns < ns:
                return False
        except OSError:
            return False
    if not sealed.holders:
        return True
    from looop_py import identity  # only with a live claim: reads /proc

    return all(identity.is_alive(pid, created) for pid, created in sealed.holders)


def _run_sensors(
    root: str, sealed: Sealed, now: float, meanwhile: Callable[[], object]
) -> tuple[dict[str, procs.Result], list[tuple[str, float, float, str, str]], set[str]]:
    """Run the sealed sensors as sensors.sense would, reusing a fresh interval snapshot;
    `meanwhile` once they started (procs.run_many)."""
    ran, cached = [], set()
    for sensor in sealed.sensors:
        name, _, interval, _, _ = sensor
        if interval and _fresh(root, name, interval, now):
            cached.add(name)
        else:
            ran.append(sensor)
    env = dict(os.environ)
    for name in sealed.scrub:
        env.pop(name, None)
    env["LOOOP_DIR"] = root
    env["LOOOP_BIN"] = sealed.bin
    os.chdir(root)  # posix_spawn starts children in looop's own directory
    jobs = [
        procs.Job(n, [os.path.join(root, "sensors", f"{n}.sh")], t, sealed.cap) for n, t, *_ in ran
    ]
    with orphans.adopting():
        runs = procs.run_many(
            jobs, cwd=root, env=env, concurrency=sealed.concurrency, meanwhile=meanwhile
        )
    return runs, ran, cached


def _steady(
    root: str, sealed: Sealed, runs: dict[str, procs.Result], changed: dict[str, float]
) -> bool:
    """Sensors whose output changed but whose signal held (churning detail): write their
    snapshots as the full beat would and re-seal with their new digests; False when
    one signal may have changed, and the full beat decides."""
    from looop_py.sensing import steady  # only when an output changed: the json module

    errors = {n: e for n, *_, e in sealed.sensors}
    bodies, digests = {}, {}
    for name, timeout in changed.items():
        raw = runs[name]
        if errors.get(name) != "-" or raw.returncode != 0 or raw.timed_out:
            return False
        if raw.stdout_bytes > sealed.cap:
            return False
        read = steady.read(raw.stdout)
        if read is None or read[0] != sealed.signals.get(name):
            return False
        bodies[f"snapshots/sensor-{name}.json"] = read[1]
        digests[name] = seal.raw_digest(raw, timeout, sealed.cap)
    try:
        stats = {rel: _replace(root, rel, body) for rel, body in bodies.items()}
        seal.write(root, sealed.steadied(digests, stats, _dir_stat(root, survey.SNAPSHOTS)))
    except OSError:
        return False  # the full beat writes what it can and says what it could not
    return True


def _replace(root: str, rel: str, body: bytes) -> str:
    """Write a snapshot atomically (no fsync: it is rewritten by any later beat); the
    survey's word for the file written, from its own descriptor."""
    path = os.path.join(root, rel)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}-q.tmp")  # jsonio's temp-file form
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        st = os.fstat(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return f"{st.st_ino}.{st.st_size}"


def _dir_stat(root: str, rel: str) -> str:
    return stat_text(os.lstat(os.path.join(root, rel)))


def _fresh(root: str, name: str, interval: float, now: float) -> bool:
    """sensors._fresh_snapshot, from the files' stat."""
    try:
        snap = os.stat(os.path.join(root, "snapshots", f"sensor-{name}.json")).st_mtime
        script = os.stat(os.path.join(root, "sensors", f"{name}.sh")).st_mtime
    except OSError:
        return False
    return seal.fresh(snap, script, interval, now)


def _record(
    root: str, sealed: Sealed, runs: dict[str, procs.Result], cached: set[str], started: float
) -> None:
    """What a full skipped beat leaves: snapshots dated now, no flap streak, one event."""
    for line in sealed.survey:
        if line.startswith("s "):
            rel = line.split(" ")[1]
            stem = rel.removeprefix("snapshots/").removesuffix(".json")
            if stem.removeprefix("sensor-") not in cached:
                try:
                    os.utime(os.path.join(root, rel))
                except OSError:
                    pass
    try:
        os.unlink(os.path.join(root, FLAP))
    except FileNotFoundError:
        pass
    sensors = ",".join(
        f'{logfile.json_str(n)}:{{"status":"failed","ms":{_ms(runs.get(n))!r},"error":{error}}}'
        for n, _, _, _, error in sealed.sensors
        if error != "-"
    )
    failed = sum(error != "-" for *_, error in sealed.sensors)
    ms = round((time.monotonic() - started) * 1000, 1)
    h = logfile.json_str(sealed.hash)
    line = (
        f'{{"ts":{logfile.json_str(logfile.iso(time.time()))},"event":"beat","outcome":"skipped",'
        f'"world_hash":{h},"prev_hash":{h},"forced":false,"forced_by":null,"changed":[],'
        f'"sensors":{{{sensors}}},"move":null,"reason":null,"decide":{{}},"ms":{ms!r},'
        f'"sensors_steady":{len(sealed.sensors) - failed},"sealed":true}}\n'
    )
    logfile.append_text(os.path.join(root, EVENTS), line.encode())


def _ms(run: procs.Result | None) -> float:
    return round(run.duration_s * 1000, 1) if run else 0.0


def _line(sealed: Sealed, started: float) -> str:
    failed = [n for n, _, _, _, e in sealed.sensors if e != "-"]
    ms = f"{(time.monotonic() - started) * 1000:.0f} ms"
    return skipped_line(f"{sealed.hash[:17]}…", health(len(sealed.sensors), failed), ms)


def health(total: int, failed: list[str]) -> str:
    """How the sensors did, as every beat line says it."""
    text = f"{total - len(failed)}/{total} sensors ok"
    return text + (f" (failed: {', '.join(failed)})" if failed else "")


def skipped_line(short_hash: str, health: str, ms: str) -> str:
    """The beat line of a skipped beat, quiet or full (cli/summary.py prints the others)."""
    return f"· skipped: world unchanged ({short_hash}), {health}, {ms}"
