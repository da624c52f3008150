"""`looop pulse`: one door used both by console.py's click-free fast path and by click.

No click here, and no typing at run time: a quiet beat is bound by start-up cost.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from looop_py.beat.result import BeatOutcome
from looop_py.cli.output import echo, json_out, show

if TYPE_CHECKING:
    from looop_py.beat.quiet import Handover
    from looop_py.workdir.context import WorkDir

# Outcomes that say nothing happened: silent on a non-terminal stdout, so cron
# mails only when the loop acted (or a beat failed).
QUIET = frozenset({BeatOutcome.SKIPPED, BeatOutcome.LOCKED, BeatOutcome.HELD})
CUT_OFF = 3  # a shared backend stopped the beat (docs/cli.md "Exit codes")


def pulse_command(
    wd: WorkDir,
    *,
    as_json: bool,
    force: bool,
    verbose: bool,
    quiet: bool,
    handover: Handover | None = None,
) -> int:
    """Run one beat, print what it did, and return the exit code (1 for a failed beat).

    `handover`: what a quiet attempt (beat/quiet.py) that found a change passes on.
    """
    from looop_py.beat.pulse import beat

    result = beat(wd, force=force, handover=handover)
    if result.cut_off is not None:  # loud, whatever the flags: cron mails it
        if as_json:
            json_out(result.to_json())
        echo(f"✗ {result.cut_off}", err=True)
        return CUT_OFF
    failed = result.outcome is BeatOutcome.FAILED
    if as_json:
        json_out(result.to_json())
        return 1 if failed else 0
    nothing_happened = result.outcome in QUIET and not sys.stdout.isatty()
    if quiet and not failed:
        return 0
    if verbose or failed or not nothing_happened:
        from looop_py.cli import summary

        if verbose and not quiet:
            show(summary.sensor_lines(result))
        echo(summary.beat_line(result), err=failed)
    return 1 if failed else 0
