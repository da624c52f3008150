"""The console entry point, error reporting, and `looop pulse` without click.

`looop pulse` runs every minute from cron and its quiet beat is mostly Python
start-up, so the plain forms of that one command (`looop [-C DIR] pulse
[--json] [--force] [-v] [-q]`) are parsed here and skip importing click.
Every other command line, `--help` included, goes through click in cli.py,
which calls the same `pulse_command` below: one behaviour, two doors.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from looop_py.errors import LooopError

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.beat.result import BeatResult

EX_SOFTWARE = 70

_PULSE_FLAGS = {
    "--json": "as_json",
    "--force": "force",
    "-v": "verbose",
    "--verbose": "verbose",
    "-q": "quiet",
    "--quiet": "quiet",
}


def parse_plain_pulse(argv: list[str]) -> dict[str, Any] | None:
    """Options of a plain `pulse` command line, or None to let click handle it."""
    workdir: str | None = None
    rest = list(argv)
    if rest[:1] in (["-C"], ["--dir"]) and len(rest) >= 2:
        workdir, rest = rest[1], rest[2:]
    elif rest and rest[0].startswith("--dir="):
        workdir, rest = rest[0].removeprefix("--dir="), rest[1:]
    if rest[:1] != ["pulse"]:
        return None
    opts: dict[str, Any] = dict.fromkeys(_PULSE_FLAGS.values(), False)
    for arg in rest[1:]:
        if arg not in _PULSE_FLAGS:
            return None
        opts[_PULSE_FLAGS[arg]] = True
    opts["workdir"] = workdir
    return opts


def main() -> None:
    opts = parse_plain_pulse(sys.argv[1:])
    if opts is None:
        from looop_py.cli.app import main as click_main

        click_main()
        return
    workdir = opts.pop("workdir")
    try:
        code = pulse_command(resolve(workdir), **opts)
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        code = report_error(exc, workdir)
    sys.exit(code)


def resolve(workdir: str | None) -> Any:
    from looop_py.workdir.paths import find_workdir

    return find_workdir(workdir, os.environ, Path.cwd())


# -- errors ----------------------------------------------------------------------


def report_error(exc: BaseException, workdir: str | None) -> int:
    """Tell the user what went wrong in one line; return the exit code."""
    if isinstance(exc, LooopError):
        sys.stderr.write(f"looop: {exc}\n")
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        sys.stderr.write("looop: interrupted\n")
        return 130
    where = log_crash(workdir)
    sys.stderr.write(f"looop: internal error (a bug): {exc!r}; traceback in {where}\n")
    return EX_SOFTWARE


def log_crash(workdir: str | None) -> str:
    """Append the current traceback to state/errors.log (stderr outside a work dir)."""
    import traceback

    text = f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} looop {' '.join(sys.argv[1:])}\n"
    text += traceback.format_exc()
    try:
        log = resolve(workdir).error_log
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as f:
            f.write(text)
        return str(log)
    except Exception:
        sys.stderr.write(text)
        return "stderr"


# -- output ----------------------------------------------------------------------


def echo(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


def json_out(value: Any) -> None:
    from looop_py import jsonio

    sys.stdout.buffer.write(jsonio.dumps(value, pretty=True) + b"\n")
    sys.stdout.flush()


# -- pulse -----------------------------------------------------------------------


def pulse_command(paths: Any, *, as_json: bool, force: bool, verbose: bool, quiet: bool) -> int:
    from looop_py.beat.pulse import beat

    result = beat(paths, force=force)
    if as_json:
        json_out(result.to_json())
    else:
        if verbose and not quiet:
            for r in result.readings:
                echo(f"  {r.status:<6} {r.stem:<24} {r.duration_s * 1000:7.1f} ms", err=True)
        nothing_happened = result.outcome in ("skipped", "locked") and not sys.stdout.isatty()
        if not quiet and (verbose or not nothing_happened or result.outcome == "failed"):
            echo(beat_line(result), err=result.outcome == "failed")
    return 1 if result.outcome == "failed" else 0


def short_hash(h: str | None) -> str:
    return "none" if not h else h[:17] + "…"


def beat_line(r: BeatResult) -> str:
    ms = f"{r.duration_s * 1000:.0f} ms"
    failed = [x.stem.removeprefix("sensor-") for x in r.readings if not x.ok]
    health = f"{len(r.readings) - len(failed)}/{len(r.readings)} sensors ok"
    if failed:
        health += f" (failed: {', '.join(failed)})"
    if r.outcome == "skipped":
        return f"· skipped: world unchanged ({short_hash(r.world_hash)}), {health}, {ms}"
    if r.outcome == "locked":
        return "· locked: another pulse is running; this one stepped aside"
    if r.outcome == "failed":
        return f"✗ beat failed: {r.reason} ({health}, {ms})"
    action = r.move.get("action") if isinstance(r.move, dict) else "?"
    return f"✓ decided {action}: {len(r.changed)} item(s) changed, {health}, {ms}"
