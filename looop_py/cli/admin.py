"""Upkeep of the work dir: schedules, schedule drop, prune."""

from __future__ import annotations

import time

import click

from looop_py.cli import render
from looop_py.cli.options import json_option, pass_workdir
from looop_py.cli.output import json_out, present, show
from looop_py.errors import UsageError
from looop_py.workdir.context import WorkDir


@click.command()
@json_option
@pass_workdir
def schedules(wd: WorkDir, as_json: bool) -> None:
    """List the durable timers the decider set with write_schedule, and when each is due.

    A timer wakes the loop through the sys-schedules probe when it comes due
    (state/schedules/NAME.json).

    \b
    Example:
      looop schedules
      looop schedules --json | jq -r '.schedules[] | select(.signal == "due") | .name'
    """
    from looop_py.schedules import timers

    probe = timers.probe(wd, time.time())
    if as_json:
        json_out(render.schedules_json(probe))
    else:
        show(render.schedules_lines(probe))


@click.group()
def schedule() -> None:
    """Change the durable timers by hand (the decider sets them with write_schedule).

    \b
    Example:
      looop schedule drop nightly-report
    """


@schedule.command("drop")
@click.argument("name", metavar="ID")
@json_option
@pass_workdir
def schedule_drop(wd: WorkDir, name: str, as_json: bool) -> None:
    """Remove the timer ID, as a drop_schedule move would. Exit 2 if there is none.

    \b
    Example:
      looop schedule drop nightly-report
      looop schedule drop nightly-report --json
    """
    from looop_py.schedules import timers

    if not timers.drop(wd, name):
        raise UsageError(f"no schedule {name!r}", "list them with `looop schedules`")
    if as_json:
        json_out({"name": name, "dropped": True})
    else:
        show(render.dropped_lines(name))


@click.command()
@click.option("--dry-run", is_flag=True, help="Change nothing; list what would go.")
@json_option
@pass_workdir
def prune(wd: WorkDir, dry_run: bool, as_json: bool) -> None:
    """Housekeeping now: remove dead workers' sessions, old decide runs and old history.

    Removes the sessions of dead workers a beat has already settled (instead
    of after [workers] session_ttl_s), the decide archives in runs/ beyond
    [limits] runs_keep, finished rounds, answered asks and refused forgeries
    past their [retention] (a beat removes only per_beat of them at a time),
    and moves rounds finished over an hour ago to rounds/done/. Like a beat it
    also settles workers that just ended and reaps dead claims. Prints what it
    did; with --dry-run, what it would do.

    \b
    Example:
      looop prune --dry-run
      looop prune
      looop prune --json | jq '.history_removed[] | .name'
    """
    from looop_py.beat.prune import prune as run_prune

    present(run_prune(wd, dry_run=dry_run), as_json, render.prune_lines)


COMMANDS = [schedules, schedule, prune]
