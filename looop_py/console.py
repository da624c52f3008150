"""The console entry point: `looop pulse` without click, every other command line through it.

`looop pulse` runs every minute from cron and its quiet beat is mostly Python
start-up, so the plain forms of that one command (`looop [-C DIR] pulse
[--json] [--force] [-v] [-q]`) are parsed here and skip importing click; so
are plain `claim`/`unclaim` lines (cli/plainclaim.py), which scripts run
around every piece of work.
Every other command line, `--help` included, goes to the click group in
cli/app.py, whose `pulse` command calls the same `pulse_command`: one
behaviour, two doors. Nothing here imports click, and cli imports nothing
from here.
"""

from __future__ import annotations

import os
import sys

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_PULSE_FLAGS = {
    "--json": "as_json",
    "--force": "force",
    "-v": "verbose",
    "--verbose": "verbose",
    "-q": "quiet",
    "--quiet": "quiet",
}


def split_dir(argv: list[str]) -> tuple[str | None, list[str]]:
    """(-C DIR or --dir=DIR if it leads, the rest of the command line)."""
    if argv[:1] in (["-C"], ["--dir"]) and len(argv) >= 2:
        return argv[1], argv[2:]
    if argv and argv[0].startswith("--dir="):
        return argv[0].removeprefix("--dir="), argv[1:]
    return None, list(argv)


def parse_plain_pulse(argv: list[str]) -> dict[str, Any] | None:
    """Options of a plain `pulse` command line, or None to let click handle it."""
    workdir, rest = split_dir(argv)
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
    if opts is None and claim_door(sys.argv[1:]):
        return
    if opts is None:
        from looop_py.cli.app import main as click_main  # click, for every other command line

        click_main()
        return
    # The plain pulse: no click, and only the modules a quiet beat needs.
    from looop_py.cli import output
    from looop_py.cli.pulse import pulse_command

    workdir = opts.pop("workdir")
    try:
        code = pulse_command(output.resolve(workdir), **opts)
    except BrokenPipeError:
        code = output.closed_pipe()
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        code = output.report_error(exc, workdir, as_json=opts["as_json"])
    leave(code)


def claim_door(argv: list[str]) -> bool:
    """Run a plain `claim`/`unclaim` line without click; False to let click have it."""
    workdir, rest = split_dir(argv)
    if rest[:1] not in (["claim"], ["unclaim"]):
        return False
    from looop_py.cli import output, plainclaim  # a plain claim line: no click

    opts = plainclaim.parse_plain(rest[0], rest[1:])
    if opts is None:
        return False
    run = plainclaim.claim_command if rest[0] == "claim" else plainclaim.unclaim_command
    code = 0
    try:
        run(output.resolve(workdir), **opts)
    except BrokenPipeError:
        code = output.closed_pipe()
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        code = output.report_error(exc, workdir, as_json=opts["as_json"])
    leave(code)
    return True


def leave(code: int) -> None:
    """Flush the standard streams and end the process without interpreter teardown.

    Tearing the interpreter down costs a quiet beat ~8 ms and does nothing it
    needs: the beat has closed its files, released the pulse lock and killed
    its sensors by now, and the plain pulse registers no atexit hooks.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        from looop_py.cli import output  # the reader went away: rare

        code = output.closed_pipe()
    except (OSError, ValueError):
        pass  # a stream already closed: nothing left to flush
    os._exit(code)
