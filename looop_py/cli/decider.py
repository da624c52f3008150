"""`looop decider test`: check the decider configured in looop.toml [decider]."""

from __future__ import annotations

import sys
import time

import click

from looop_py.cli import render
from looop_py.cli.options import json_option, pass_workdir
from looop_py.cli.output import present
from looop_py.workdir.context import WorkDir


@click.group()
def decider() -> None:
    """Check the decider configured in looop.toml [decider].

    \b
    Example:
      looop decider test
    """


@decider.command(name="test")
@json_option
@pass_workdir
def decider_test(wd: WorkDir, as_json: bool) -> None:
    """Send a tiny prompt to the configured decider; show its move, usage and latency.

    The move is validated as a real one would be, and nothing is executed.
    Exits 0 when the decider answered with a valid move, 1 otherwise.
    (The script backend consumes its next move.)

    \b
    Example:
      looop decider test
      looop decider test --json | jq .usage
    """
    from looop_py.deciders.check import run_test

    view = run_test(wd, time.time())
    present(view, as_json, render.decider_test_lines)
    sys.exit(0 if view.ok else 1)


COMMANDS = [decider]
