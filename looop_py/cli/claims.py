"""Claims (leases on a name) from the command line: claim, unclaim, claims."""

from __future__ import annotations

import time

import click

from looop_py.cli import render
from looop_py.cli.options import json_option, pass_workdir, pid_option, session_option
from looop_py.cli.output import json_out, show
from looop_py.cli.plainclaim import claim_command, unclaim_command
from looop_py.workdir.context import WorkDir


@click.command()
@click.argument("name")
@session_option
@click.option("--ttl", type=float, metavar="S", help="Expire after S seconds unless renewed.")
@click.option("--renew", is_flag=True, help="Owner only: push the expiry to now + ttl.")
@pid_option
@json_option
@pass_workdir
def claim(
    wd: WorkDir,
    *,
    name: str,
    session: str | None,
    ttl: float | None,
    renew: bool,
    pid: int | None,
    as_json: bool,
) -> None:
    """Take the lease NAME; print its epoch (a fencing token). Exit 4 if someone else holds it.

    Exit 0 means you hold it (claiming again is harmless). Any other exit
    means do not proceed. It is released by `looop unclaim NAME`, or reaped
    by the next beat once its holder is dead or its ttl has passed.

    \b
    Example:
      epoch=$("$LOOOP_BIN" claim repo-main) || exit 0     # someone else is on it
      looop claim deploy --ttl 600 && looop claim deploy --ttl 600 --renew
      looop claim deploy --json | jq .action             # acquired | held | renewed
    """
    claim_command(wd, name=name, session=session, ttl=ttl, renew=renew, pid=pid, as_json=as_json)


@click.command()
@click.argument("name")
@session_option
@pid_option
@json_option
@pass_workdir
def unclaim(wd: WorkDir, name: str, session: str | None, pid: int | None, as_json: bool) -> None:
    """Release the lease NAME (harmless if it is not held). Exit 4 if another live holder has it.

    \b
    Example:
      looop unclaim repo-main
      looop unclaim repo-main --json | jq .released.epoch
    """
    unclaim_command(wd, name=name, session=session, pid=pid, as_json=as_json)


@click.command()
@json_option
@pass_workdir
def claims(wd: WorkDir, as_json: bool) -> None:
    """List claims: who holds which name, its epoch, age and expiry.

    \b
    Example:
      looop claims
      looop claims --json | jq '.claims[] | select(.live) | .name'
    """
    from looop_py.coord.choose import coordinator

    now = time.time()
    views = coordinator(wd).list_claims(now)
    if as_json:
        json_out({"claims": [v.to_json() for v in views]})
    else:
        show(render.claims_lines(views, now))


COMMANDS = [claim, unclaim, claims]
