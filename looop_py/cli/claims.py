"""Claims (leases on a name) from the command line: claim, unclaim, claims."""

from __future__ import annotations

import os
import time

import click

from looop_py.cli import worklines
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
        show(worklines.claims_lines(views, now))


@click.group()
def fence() -> None:
    """Fencing tokens for scripts: is the token this command runs under still current?

    \b
    Example:
      looop fence check
    """


@fence.command("check")
@click.argument("token", required=False, metavar="[NAME:TOKEN]")
@json_option
@pass_workdir
def fence_check(wd: WorkDir, token: str | None, as_json: bool) -> None:
    """Exit 0 while NAME:TOKEN (default $LOOOP_FENCE) is still its claim's live token.

    A beat on etcd confirms its pulse just before a command it runs starts, and
    passes the token as LOOOP_FENCE=pulse:TOKEN (and LOOOP_FENCE_DEADLINE, the
    unix time until which the beat was sure to hold it). Check it again before
    a write of your own that must not happen twice; exit 4 means a newer holder
    has it: do not proceed. On files the pulse lock on this machine is the
    fence: exit 0 with nothing to check. `looop claim NAME` prints an epoch:
    NAME:EPOCH fences the same way.

    \b
    Example:
      looop fence check >/dev/null || exit 0; git push   # inside a run_shell
      looop fence check "deploy:$epoch" --json | jq .held
    """
    from looop_py.coord import fence as fence_mod
    from looop_py.workdir.shelf import FENCE_ENV

    found = fence_mod.check(wd, token or os.environ.get(FENCE_ENV) or None)
    if as_json:
        json_out(found)
    else:
        show([f"held: {found['fence'] or found.get('note')} ({found['backend']})"])


COMMANDS = [claim, unclaim, claims, fence]
