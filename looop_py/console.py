"""The console entry point: `looop pulse` without click, every other command line through it.

`looop pulse` runs every minute from cron and its quiet beat is mostly Python
start-up, so the plain forms of that one command (`looop [-C DIR] pulse
[--json] [--force] [-v] [-q]`) are parsed here and skip importing click.
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
    if sys.argv and "/" in sys.argv[0]:
        # Children find looop through LOOOP_BIN; the plain pulse changes directory.
        sys.argv[0] = os.path.abspath(sys.argv[0])
    opts = parse_plain_pulse(sys.argv[1:])
    if opts is None:
        from looop_py.cli.app import main as click_main  # click, for every other command line

        click_main()
        return
    workdir = opts.pop("workdir")
    handover = None
    if not (opts["as_json"] or opts["force"] or opts["verbose"]):
        # A seal from the last beat may prove nothing changed: then nothing below loads.
        from looop_py.beat import quiet

        root = quiet.find_root(workdir)
        try:
            outcome = quiet.attempt(root, quiet=opts["quiet"]) if root else None
        except Exception:
            outcome = None  # the full beat meets (and reports) whatever broke it
        if isinstance(outcome, int):
            leave(outcome)
            return  # (leave ends the process; tests replace it)
        handover = outcome
    # The plain pulse: no click, and only the modules a beat needs.
    from looop_py.cli import output
    from looop_py.cli.pulse import pulse_command

    try:
        paths = output.resolve(workdir)
        workdir = str(paths.root)
        os.chdir(paths.root)  # sensors start in the work dir: posix_spawn, no subprocess
        code = pulse_command(paths, handover=handover, **opts)
    except BrokenPipeError:
        code = output.closed_pipe()
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        code = output.report_error(exc, workdir, as_json=opts["as_json"])
    leave(code)


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
