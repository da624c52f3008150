"""Loops from the command line: loops, run, rounds, patterns, new."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from looop_py.cli import render
from looop_py.cli.options import json_option, pass_workdir
from looop_py.cli.output import Note, json_out, present, show
from looop_py.workdir.context import WorkDir

if TYPE_CHECKING:
    from looop_py.engine.spec import LoopSpec


@click.command()
@json_option
@pass_workdir
def loops(wd: WorkDir, as_json: bool) -> None:
    """List the loops (goals whose frontmatter makes them one): level, cadence, next fire,
    last outcome and tokens spent.

    \b
    Example:
      looop loops
      looop loops --json | jq '.loops[] | {name, next_fire}'
    """
    from looop_py.loops.views import overview

    present(overview(wd, time.time()), as_json, render.loops_lines)


@click.command(name="run")
@click.argument("loop")
@click.option("--wait", is_flag=True, help="Also wait for a human's approval if it escalates.")
@json_option
@pass_workdir
def run_loop(wd: WorkDir, loop: str, wait: bool, as_json: bool) -> None:
    """Run one round of LOOP in the foreground and print its report.

    The same round the pulse would run (workers, claim, gate, memory); it
    returns when the round ends or, unless --wait, when it asks a human.
    Exits 1 when the round failed.

    \b
    Example:
      looop run daily-triage
      looop run ci-sweeper --json | jq .outcome
    """
    from looop_py.loops import advance
    from looop_py.loops.specs import load_spec

    warnings = _action_warnings(wd, load_spec(wd, loop))
    if not as_json:
        show(Note(f"warning: {w}") for w in warnings)
    report = advance.run(wd, loop, wait_for_human=wait)
    if as_json:
        json_out({**report.to_dict(), "warnings": warnings})
    else:
        show(report.render().splitlines())
    if report.outcome is not None and report.outcome.value == "failed":
        sys.exit(1)


@click.command()
@click.option("--all", "show_all", is_flag=True, help="Also list finished rounds.")
@json_option
@pass_workdir
def rounds(wd: WorkDir, show_all: bool, as_json: bool) -> None:
    """List loop rounds: live ones (where each is), or all with --all.

    \b
    Example:
      looop rounds
      looop rounds --all --json | jq '.rounds[] | {id, outcome}'
    """
    from looop_py.loops.views import list_rounds

    rows = list_rounds(wd, include_done=show_all)
    if as_json:
        json_out({"rounds": [r.to_json() for r in rows]})
    else:
        show(render.rounds_lines(rows, all_=show_all))


@click.command()
@json_option
def patterns(as_json: bool) -> None:
    """List the ready-made loop patterns: the seven reference ones, then `demo`, which runs
    offline (its maker and checker are bash on the `shell` runtime).

    \b
    Example:
      looop patterns
      looop patterns --json | jq -r '.patterns[].name'
      looop new ci-sweeper
      looop new demo && looop run demo    # offline: no agent CLI, no model
    """
    from looop_py.engine import patterns as catalogue

    specs = catalogue.offered()
    if as_json:
        json_out({"patterns": [s.to_dict() for s in specs]})
    else:
        show(render.patterns_lines(specs))


@click.command()
@click.argument("pattern")
@click.option("--name", help="Goal id to write (default: the pattern's name).")
@json_option
@pass_workdir
def new(wd: WorkDir, pattern: str, name: str | None, as_json: bool) -> None:
    """Write a goal file from a pattern, ready to edit (never overwrites).

    \b
    Example:
      looop new daily-triage
      looop new ci-sweeper --name ci-main
    """
    from looop_py.loops.specs import write_goal

    spec, _ = write_goal(wd, pattern, name=name)
    warnings = _action_warnings(wd, spec)
    if as_json:
        json_out({**render.new_goal_json(spec, pattern), "warnings": warnings})
    else:
        show(render.new_goal_lines(spec))
        show(Note(f"warning: {w}") for w in warnings)


def _action_warnings(wd: WorkDir, spec: LoopSpec) -> list[str]:
    """What would mislead later, said now: an approval that would run nothing."""
    from looop_py.engine.actions import action_commands
    from looop_py.loops.executor import unrunnable_action

    warning = unrunnable_action(spec, action_commands(wd.config.actions))
    return [warning] if warning else []


COMMANDS = [loops, run_loop, rounds, patterns, new]
