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
    from collections.abc import Callable
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
    args = rest[1:]
    while args:
        arg, args = args[0], args[1:]
        if arg in ("-C", "--dir") and args:  # `looop pulse -C DIR`, as `looop -C DIR pulse`
            workdir, args = args[0], args[1:]
        elif arg.startswith("--dir="):
            workdir = arg.removeprefix("--dir=")
        elif arg in _PULSE_FLAGS:
            opts[_PULSE_FLAGS[arg]] = True
        else:
            return None
    opts["workdir"] = workdir
    return opts


def main() -> None:
    if sys.argv and "/" in sys.argv[0]:
        # Children find looop through LOOOP_BIN; the plain pulse changes directory.
        sys.argv[0] = os.path.abspath(sys.argv[0])
    opts = parse_plain_pulse(sys.argv[1:])
    if opts is None and claim_door(sys.argv[1:]):
        return
    if opts is None:
        from looop_py.cli.app import main as click_main  # click, for every other command line

        click_main()
        return
    workdir = opts.pop("workdir")
    if workdir:  # the pulse changes directory: a relative -C must not change meaning
        workdir = os.path.abspath(os.path.expanduser(workdir))
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
    # A full beat, and the process ends with it (leave: os._exit): the cyclic collector's
    # passes over all it imports and reads (~5 ms of CPU at 100 goals, ~10 ms at 10,000)
    # would free nothing the exit does not.
    import gc  # past the quiet attempt only

    gc.disable()
    # The plain pulse: no click, and only the modules a beat needs.
    from looop_py.cli import output
    from looop_py.cli.pulse import pulse_command

    def pulse() -> int:
        from looop_py.coord.choose import open_workdir  # past the quiet attempt only

        paths = output.resolve(workdir)
        os.chdir(paths.root)  # sensors start in the work dir: posix_spawn, no subprocess
        wd = open_workdir(paths)
        try:
            return pulse_command(wd, handover=handover, **opts)
        finally:
            wd.close()

    leave(guarded(pulse, workdir, as_json=opts["as_json"]))


def guarded(run: Callable[[], int | None], workdir: str | None, *, as_json: bool) -> int:
    """Run a door's command: its exit code, a quiet 0 for a closed pipe, or the error reported."""
    from looop_py.cli import output  # loaded already by the door that calls

    try:
        return run() or 0
    except BrokenPipeError:
        return output.closed_pipe()
    except BaseException as exc:
        if isinstance(exc, SystemExit):
            raise
        return output.report_error(exc, workdir, as_json=as_json)


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

    def claim() -> int | None:
        from looop_py.coord.choose import open_workdir  # a plain claim line: no click

        wd = open_workdir(output.resolve(workdir))
        try:
            return run(wd, **opts)
        finally:
            wd.close()

    leave(guarded(claim, workdir, as_json=opts["as_json"]))
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
