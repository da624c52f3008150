"""Run user sensors and normalize what they print into `{signal, detail}`.

Each `sensors/<name>.sh` runs with cwd = the work dir, under its timeout and
the output cap (procs.py does the process-group and cap work). A sensor is a
reading, not a daemon: whatever it leaves running when it exits is ended.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from looop_py import jsonio, orphans, procs
from looop_py.ids import is_safe_segment
from looop_py.records import record
from looop_py.sensing.seal import fresh, parse_header, raw_digest
from looop_py.workdir.paths import Paths
from looop_py.world import is_error_signal

STDERR_TAIL = 1024

RC_NOT_EXECUTABLE = 126


# @record: nothing compares these (identity) or assigns to them (mypy); each generated
# method is a full beat's fixed cost at import (records.py).
@record(slots=True)
class Sensor:
    """One script in sensors/, with the knobs its header sets."""

    name: str
    path: Path
    mtime: float
    timeout_s: float
    interval_s: float | None
    head: os.stat_result | None = None  # its stat while the header was read (unchanged)

    @property
    def stem(self) -> str:
        return f"sensor-{self.name}"


RawRun = procs.Result  # what a process did, before any interpretation


@record(slots=True)
class Reading:
    """A normalized snapshot plus how it was obtained."""

    stem: str
    snapshot: dict[str, Any]
    duration_s: float
    cached: bool = False
    raw_digest: str | None = None  # what normalization read of the run (beat/quiet.py)

    @property
    def ok(self) -> bool:
        return not is_error_signal(self.snapshot.get("signal"))

    @property
    def error_code(self) -> Any:
        """A failed reading's exit code, or the word its error signal carries."""
        sig = self.snapshot.get("signal", {})
        return sig.get("exit_code", sig.get("error")) if isinstance(sig, dict) else None

    @property
    def status(self) -> str:
        if not self.ok:
            return "failed"  # the word `looop status` uses for a sensor in error
        return "cached" if self.cached else "ok"


# -- discovery -----------------------------------------------------------------


def discover(paths: Paths, default_timeout_s: float) -> list[Sensor]:
    sensors: list[Sensor] = []
    try:
        entries = sorted(os.scandir(paths.sensors), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    for entry in entries:
        name = entry.name.removesuffix(".sh")
        if name == entry.name or not is_safe_segment(name) or not entry.is_file():
            continue
        held: os.stat_result | None = None
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                before = os.fstat(fd)
                header = parse_header(os.read(fd, 4096))  # only the head: never the whole file
                held = before if _same(before, os.fstat(fd)) else None
            finally:
                os.close(fd)
            mtime = entry.stat().st_mtime
        except OSError:
            header, mtime = {}, 0.0
        timeout = header.get("timeout", default_timeout_s)
        interval = header.get("interval")
        sensors.append(Sensor(name, Path(entry.path), mtime, timeout, interval or None, held))
    return sensors


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_size, a.st_mtime_ns, a.st_ctime_ns) == (
        b.st_ino,
        b.st_size,
        b.st_mtime_ns,
        b.st_ctime_ns,
    )


# -- normalization (pure) ------------------------------------------------------


def _error(exit_code: int, message: str, stderr: bytes) -> dict[str, Any]:
    return {
        "signal": {"error": True, "exit_code": exit_code},
        "detail": {"message": message, "stderr": stderr.decode("utf-8", "replace").strip()},
    }


def normalize(raw: RawRun, *, cap: int, timeout_s: float) -> dict[str, Any]:
    """Turn what a sensor did into `{signal, detail}` (the table in docs/sensors.md)."""
    rc = raw.exit_code
    if raw.returncode is None:
        message = (
            "cannot run: the script or the interpreter on its #! line was not found"
            if rc == 127
            else "cannot run: not executable (chmod +x it) or a bad #! line"
        )
        return _error(rc, message, raw.stderr_tail)
    if raw.timed_out:
        message = f"timed out after {timeout_s:g}s; make it faster or raise its "
        return _error(rc, message + "'# looop:timeout=N' header", raw.stderr_tail)
    if raw.returncode < 0:
        import signal  # only for a sensor a signal killed: its names are an enum (~1 ms)

        try:
            signame = signal.Signals(-raw.returncode).name
        except ValueError:
            signame = f"signal {-raw.returncode}"
        return _error(rc, f"killed by {signame}", raw.stderr_tail)
    if rc != 0:
        return _error(rc, f"exited {rc}; fix the script or its environment", raw.stderr_tail)
    if raw.stdout_bytes > cap:
        return {
            "signal": {"error": "too-large", "cap": cap},
            "detail": {
                "bytes": raw.stdout_bytes,
                "message": "print a small {signal, detail} summary, not a raw dump",
            },
        }
    try:
        text = raw.stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        return {
            "signal": {"error": "not-utf8"},
            "detail": {"bytes": raw.stdout_bytes, "message": f"stdout is not UTF-8 ({exc.reason})"},
        }
    return interpret(text)


def _too_deep() -> dict[str, Any]:
    return {
        "signal": {"error": "too-deep", "max_depth": jsonio.MAX_DEPTH},
        "detail": {
            "message": f"the JSON nests more than {jsonio.MAX_DEPTH} levels deep (detail"
            " included); print a flat {signal, detail} summary",
        },
    }


def interpret(text: str) -> dict[str, Any]:
    """A sensor's successful stdout: JSON with `signal`, other JSON, or plain text.

    JSON nested past jsonio.MAX_DEPTH, in `signal` or `detail`, is a too-deep
    error: it could be neither stored nor shown.
    """
    stripped = text.strip()
    try:
        value = jsonio.loads_bounded(stripped) if stripped else stripped
    except jsonio.TooDeep:
        return _too_deep()
    except jsonio.JSONDecodeError as exc:
        if jsonio.is_depth_error(exc):
            return _too_deep()
        return {"signal": stripped, "detail": {}}
    if _LONG_DIGITS.search(stripped) and _has_huge_int(stripped):
        return {
            "signal": {"error": "number-out-of-range"},
            "detail": {
                "message": "an integer does not fit in 64 bits and would be silently rounded;"
                " print it as a string"
            },
        }
    if isinstance(value, dict) and "signal" in value:
        snapshot = dict(value)
        snapshot.setdefault("detail", {})
        return snapshot
    return {"signal": value, "detail": {}}


_LONG_DIGITS = re.compile(r"\d{19}")
_INT64 = 1 << 63


def _has_huge_int(text: str) -> bool:
    """Does the JSON hold an integer outside 64 bits (which orjson reads as a float)?"""

    found = False

    def check(literal: str) -> int:
        nonlocal found
        value = int(literal)
        found = found or not -_INT64 <= value < 2 * _INT64  # orjson keeps i64 and u64 exact
        return 0

    try:
        json.loads(text, parse_int=check)
    except (ValueError, RecursionError):
        return False
    return found


# -- one SENSE step ------------------------------------------------------------


def _fresh_snapshot(paths: Paths, sensor: Sensor, now: float) -> dict[str, Any] | None:
    """The stored snapshot, if the sensor's interval says it may be reused."""
    if sensor.interval_s is None:
        return None
    try:
        st = paths.snapshot(sensor.stem).stat()
    except FileNotFoundError:
        return None
    if not fresh(st.st_mtime, sensor.mtime, sensor.interval_s, now):
        return None  # edited since, or too old
    try:
        value = jsonio.read_json(paths.snapshot(sensor.stem))
    except Exception:
        return None
    return value if isinstance(value, dict) and "signal" in value else None


def sense(
    paths: Paths,
    sensors: Iterable[Sensor],
    *,
    env: Mapping[str, str],
    cap: int,
    concurrency: int,
    now: float,
    ran: Mapping[str, RawRun] | None = None,
) -> list[Reading]:
    """Run every sensor (bounded concurrency), write its snapshot, return the readings.

    `ran`: runs a quiet attempt already made this beat (by sensor name), used
    as they are: a sensor runs once per beat.
    """
    todo = list(sensors)
    ran = ran or {}
    readings: dict[str, Reading] = {}
    jobs: list[procs.Job] = []
    for sensor in todo:
        if sensor.name in ran:
            continue  # a quiet attempt ran it already this beat
        cached = _fresh_snapshot(paths, sensor, now)
        if cached is not None:
            readings[sensor.name] = Reading(sensor.stem, cached, 0.0, cached=True)
        else:
            jobs.append(procs.Job(sensor.name, [str(sensor.path)], sensor.timeout_s, cap))
    by_name = {s.name: s for s in todo}
    # A sensor is a reading, not a daemon: what it starts outside its process group
    # (setsid) is adopted by looop while sensors run, and ended when they are done.
    with orphans.adopting():
        results = procs.run_many(jobs, cwd=paths.root, env=env, concurrency=concurrency)
        results.update((s.name, ran[s.name]) for s in todo if s.name in ran)
        for name, result in list(results.items()):
            if result.spawn_errno == errno.ENOEXEC:
                # No #! line: do what a shell does with such a file and hand it to bash.
                sensor = by_name[name]
                results[name] = procs.run(
                    ["bash", str(sensor.path)],
                    cwd=paths.root,
                    env=env,
                    timeout_s=sensor.timeout_s,
                    cap=cap,
                )
    for name, raw in results.items():
        sensor = by_name[name]
        snapshot = normalize(raw, cap=cap, timeout_s=sensor.timeout_s)
        try:
            jsonio.write_json_if_changed(paths.snapshot(sensor.stem), snapshot)
        except OSError as exc:  # a full disk fails this reading, not the beat
            snapshot = _error(RC_NOT_EXECUTABLE, f"could not store the snapshot: {exc}", b"")
        key = raw_digest(raw, sensor.timeout_s, cap)
        readings[name] = Reading(sensor.stem, snapshot, raw.duration_s, raw_digest=key)
    prune(paths, keep={s.stem for s in todo})
    return [readings[s.name] for s in todo]


def prune(paths: Paths, keep: set[str]) -> None:
    """Remove snapshots of sensors that no longer exist (sys-* belong to probes)."""
    try:
        entries = list(os.scandir(paths.snapshots))
    except FileNotFoundError:
        return
    for entry in entries:
        stem = entry.name.removesuffix(".json")
        if entry.name.startswith("sensor-") and stem != entry.name and stem not in keep:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
