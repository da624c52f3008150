"""Keeping a work dir running: doctor, cron show|install|remove, up, down."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from looop_py.cli import onboard
from looop_py.cli.options import json_option, pass_paths, pass_workdir
from looop_py.cli.output import json_line, json_out, present, show
from looop_py.errors import LooopError, UsageError
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.beat.result import BeatResult


@click.command()
@click.option("--offline", is_flag=True, help="Skip the check that calls the decider.")
@json_option
@pass_paths
def doctor(paths: Paths, offline: bool, as_json: bool) -> None:
    """Check that the pieces of this work dir work together; one line each, with a fix.

    The work dir and its permissions, looop.toml, the decider (one tiny call,
    unless --offline), each runtime's program, the daily budget, the crontab
    line and the last beat, the pulse lock, disk space, the clock. Exits 0
    when nothing failed (warnings included), 1 otherwise.

    \b
    Example:
      looop doctor --offline
      looop doctor --json | jq '.checks[] | select(.verdict != "ok")'
    """
    from looop_py.ops.doctor import diagnose

    report = diagnose(paths, offline=offline)  # a broken looop.toml is one of its checks
    present(report, as_json, onboard.doctor_lines)
    sys.exit(0 if report.ok else 1)


@click.group()
def cron() -> None:
    """Run this work dir's pulse every minute from the user's crontab.

    \b
    Example:
      looop cron show
      looop cron install        # shows the line, asks, then writes it
      looop cron remove --yes
    """


@cron.command("show")
@json_option
@pass_paths
def cron_show(paths: Paths, as_json: bool) -> None:
    """Say whether this work dir's line is in the crontab, and show it.

    \b
    Example:
      looop cron show
    """
    from looop_py.ops import cron as crontab

    present(crontab.status(paths), as_json, onboard.cron_lines)


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError("not asking on a non-terminal stdin", "pass --yes to go ahead")
    if not click.confirm(question, default=True, err=True):
        raise UsageError("nothing changed", "pass --yes to skip the question")


@cron.command("install")
@click.option("--yes", is_flag=True, help="Do not ask.")
@json_option
@pass_workdir
def cron_install(wd: WorkDir, yes: bool, as_json: bool) -> None:
    """Add (or bring up to date) the line that runs `looop pulse` every minute.

    Every other line of the crontab stays as it was; installing twice is harmless.
    The job's PATH, the agent CLIs' settings and the keys looop.toml names go into
    state/cron.env (mode 0600), which the line sources: never into the crontab.
    Run it again after changing PATH or a key.

    \b
    Example:
      looop cron install
      looop -C ~/ops cron install --yes
    """
    import os

    from looop_py.ops import cron as crontab

    entry = crontab.status(wd.paths)
    env = crontab.job_env(os.environ, wd.config)
    if not entry.up_to_date:
        if not as_json:
            show(["this line goes into your crontab:", f"  {entry.line}"])
            show([f"and {entry.env_file} (0600) sets: {', '.join(env)}"])
        _confirm("install it?", yes)
    entry = crontab.install(wd.paths, env)
    if as_json:
        json_out(entry.to_json())
    else:
        show(onboard.cron_lines(entry, did="installed"))


@cron.command("remove")
@click.option("--yes", is_flag=True, help="Do not ask.")
@json_option
@pass_paths
def cron_remove(paths: Paths, yes: bool, as_json: bool) -> None:
    """Remove this work dir's line; every other line stays as it was.

    \b
    Example:
      looop cron remove --yes
    """
    from looop_py.ops import cron as crontab

    entry = crontab.status(paths)
    if entry.installed is not None:
        _confirm(f"remove `{entry.installed}`?", yes)
        entry = crontab.remove(paths)
    if as_json:
        json_out(entry.to_json())
    else:
        show(onboard.cron_lines(entry, did="removed"))


@click.command()
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=1.0),
    default=60.0,
    show_default=True,
    help="Seconds between beats when nothing is edited.",
)
@click.option("-v", "--verbose", is_flag=True, help="Print every beat, quiet ones too.")
@click.option("--print-unit", is_flag=True, help="Print a systemd user unit for this, and exit.")
@json_option
@pass_paths
def up(paths: Paths, interval_s: float, verbose: bool, print_unit: bool, as_json: bool) -> None:
    """Run beats in this process: every --interval, and within a second of an edit.

    An answer, an approval, an edited goal, PLAYBOOK.md or sensor script is
    acted on at once instead of at the next cron minute. Cron and `up` never
    beat at once (the pulse lock); stop it with Ctrl-C or `looop down`.

    \b
    Example:
      looop up                       # in a terminal, tmux or a service
      looop up --print-unit > ~/.config/systemd/user/looop-ops.service
      looop up --json | jq -c 'select(.outcome == "decided")'

    --json prints one JSON object per line (JSON Lines): {"up": DIR,
    "interval_s"} first, then each beat's result as `looop pulse --json` has it.
    """
    from looop_py.cli.pulse import QUIET
    from looop_py.cli.summary import beat_line
    from looop_py.coord.choose import Reopening
    from looop_py.ops import resident

    if print_unit:
        unit = resident.unit_text(paths, interval_s)
        if as_json:
            json_out({"unit": unit})
        else:
            show([unit])
        return

    def say(result: BeatResult) -> None:
        if as_json:
            json_line(result.to_json())
        elif verbose or result.outcome not in QUIET:
            show([beat_line(result)])

    if as_json:
        json_line({"up": str(paths.root), "interval_s": interval_s})
    else:
        show([f"looop up: beating {paths.root} every {interval_s:g} s and on every edit"])
    opened = Reopening(paths)  # each beat reads looop.toml again after an edit
    try:
        # --json and -v show each beat's readings: the full beat, as `looop pulse` does
        sealed = not (as_json or verbose)
        resident.serve(opened, interval_s=interval_s, on_beat=say, sealed=sealed)
    finally:
        opened.close()


@click.command()
@json_option
@pass_paths
def down(paths: Paths, as_json: bool) -> None:
    """Stop this work dir's `looop up` (the beat in progress ends cleanly first).

    On etcd it also hands over the shared pulse if this host holds it, so another
    host's next beat takes it at once instead of after the lease TTL.

    \b
    Example:
      looop down
    """
    from looop_py.coord.choose import open_workdir
    from looop_py.ops import resident

    pid = resident.stop_resident(paths)
    resigned, unsure = None, None
    try:  # on etcd: the pulse this host holds goes to the next host's beat at once
        wd = open_workdir(paths)
        try:
            resigned = resident.resign(wd)
        finally:
            wd.close()
    except LooopError as exc:
        unsure = f"{exc.message} (the pulse goes by itself when its lease expires)"
    if as_json:
        json_out({"stopped": pid, "resigned": resigned, "error": unsure})
        return
    lines = [f"stopped looop up (pid {pid})" if pid else "looop up was not running"]
    if resigned:
        lines.append(f"handed over the shared pulse (token {resigned['token']})")
    if unsure:
        lines.append(f"could not hand over the shared pulse: {unsure}")
    show(lines)


COMMANDS = [doctor, cron, up, down]
