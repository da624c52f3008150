"""The beat, seen from the command line: pulse, sense, status, why, journal."""

from __future__ import annotations

import sys

import click

from looop_py.cli import render
from looop_py.cli.options import json_option, pass_paths, pass_workdir
from looop_py.cli.output import json_out, present, show
from looop_py.cli.pulse import CUT_OFF as DEGRADED  # one code for "cut off from etcd"
from looop_py.cli.pulse import pulse_command
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths


@click.command()
@json_option
@click.option("--force", is_flag=True, help="Decide even if the world is unchanged.")
@click.option("-v", "--verbose", is_flag=True, help="Also show each sensor on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing unless the beat failed.")
@pass_workdir
def pulse(wd: WorkDir, as_json: bool, force: bool, verbose: bool, quiet: bool) -> None:
    """Run one beat: sense, hash, and decide only if the world changed.

    Quiet on stdout when nothing happened (skipped, held or locked) and stdout
    is not a terminal, so cron mails you only when the loop acted. Exits 0
    for skipped, decided, held and locked beats, 1 for a failed one.

    \b
    Example:
      looop pulse                 # one beat
      looop pulse --json          # outcome, world_hash, changed, sensors, ms
      * * * * * looop -C ~/ops pulse     # crontab line
    """
    sys.exit(pulse_command(wd, as_json=as_json, force=force, verbose=verbose, quiet=quiet))


@click.command()
@json_option
@pass_paths
def sense(paths: Paths, as_json: bool) -> None:
    """Run the sensors now and show readings and what would change.

    Writes snapshots but decides and commits nothing, so the next
    `looop pulse` still sees the same changes.

    \b
    Example:
      looop sense
      looop sense --json | jq '.changed'
    """
    from looop_py.beat.preview import preview
    from looop_py.coord.choose import open_workdir

    wd = open_workdir(paths, write_cache=False)  # a door of its own: nothing under state/
    try:
        present(preview(wd), as_json, render.sense_lines)
    finally:
        wd.close()


@click.command()
@json_option
@pass_workdir
def status(wd: WorkDir, as_json: bool) -> None:
    """Show the last beat, the committed world hash, sensor health and counts.

    Cut off from a shared backend (etcd) it shows this host's local mirror, marked
    stale with its age, and exits 3 ("degraded").

    \b
    Example:
      looop status
      looop status --json | jq .sensors.failed
    """
    from looop_py.beat.views import status as build

    view = build(wd)
    present(view, as_json, render.status_lines)
    if view.degraded is not None:
        sys.exit(DEGRADED)  # shown from the local mirror: cut off from the shared backend


@click.command()
@json_option
@pass_workdir
def why(wd: WorkDir, as_json: bool) -> None:
    """Explain the last beat: why it skipped or woke, and what changed (old → new).

    \b
    Example:
      looop why
      looop why --json | jq '.changed[].item'
    """
    from looop_py.beat.views import why as build

    present(build(wd), as_json, render.why_lines)


@click.command()
@click.option(
    "-n",
    "lines",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many lines to show.",
)
@json_option
@pass_paths
def journal(paths: Paths, lines: int, as_json: bool) -> None:
    """Show the newest lines of journal.md: one line per executed move.

    \b
    Example:
      looop journal -n 50
      looop journal --json | jq -r '.lines[-1]'
    """
    from looop_py.workdir import journal as journal_file

    tail = journal_file.tail(paths, lines)
    if as_json:
        json_out({"lines": tail})
    else:
        show(render.journal_lines(tail))


COMMANDS = [pulse, sense, status, why, journal]
