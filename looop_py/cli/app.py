"""The `looop` click group: global options, error mapping, and every verb module's commands.

How a command ends (exit codes: see cli/output.py or `looop help cli`, "Exit codes"):
a LooopError prints its message and hint and exits with its code; a bug is
logged to state/errors.log and exits 70; a closed pipe (`looop status |
head -1`) ends quietly with 0; a usage error exits 2. Under --json each of
these is one JSON object on stdout: {"error": …, "hint": …, "exit_code": n}.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from looop_py import __version__
from looop_py.cli import (
    admin,
    beat,
    claims,
    decider,
    docs,
    init,
    loops,
    mailbox,
    ops,
    output,
    web,
    workers,
)
from looop_py.cli.options import JSON_WANTED, State
from looop_py.errors import LooopError


class LooopGroup(click.Group):
    """Maps what a command raises to a message and an exit code (JSON under --json)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            ctx.exit(output.closed_pipe())
        except (LooopError, KeyboardInterrupt, Exception) as exc:
            state = ctx.find_object(State)
            workdir = state.workdir if state else None
            as_json = bool(ctx.meta.get(JSON_WANTED))
            ctx.exit(output.report_error(exc, workdir, as_json=as_json))

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            rv = super().main(argv, prog_name, complete_var, False, **extra)
            code = rv if isinstance(rv, int) else 0
        except click.ClickException as exc:  # click's usage errors: exit 2
            code = exc.exit_code
            if _wants_json(argv):
                where = exc.ctx if isinstance(exc, click.UsageError) else None
                hint = f"see `{where.command_path} --help`" if where else None
                output.error_out(exc.format_message(), hint, code, as_json=True)
            else:
                exc.show()
        except click.Abort:
            output.echo("Aborted!", err=True)
            code = 1
        sys.exit(code)


def _wants_json(argv: list[str]) -> bool:
    return "--json" in (argv[: argv.index("--")] if "--" in argv else argv)


@click.group(
    cls=LooopGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "-C",
    "--dir",
    "workdir",
    metavar="DIR",
    help="Work dir to use (default: $LOOOP_DIR, else the nearest ancestor holding looop.toml).",
)
@click.version_option(__version__, prog_name="looop")
@click.pass_context
def cli(ctx: click.Context, workdir: str | None) -> None:
    """looop: a filesystem-native sensor/decider control loop.

    Sensors in sensors/ read the world every beat; when what they report
    changes, a decider picks one move and looop carries it out.

    \b
    Start:
      looop init ~/ops && cd ~/ops
      looop pulse            # one beat
      looop cron install     # run it every minute from your crontab
      looop doctor --offline # check that the pieces work together
      looop status
      looop help             # the reference: sensors, goals, loops, the CLI, exit codes …
    """
    ctx.obj = State(workdir)


def _dir_after_verb(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        state = ctx.find_object(State)
        if state is not None:
            state.workdir = value


def _accept_dir(command: click.Command) -> None:
    """`looop status -C DIR` means `looop -C DIR status`: every verb takes -C/--dir too."""
    command.params.append(
        click.Option(
            ["-C", "--dir", "verb_workdir"],
            metavar="DIR",
            expose_value=False,
            is_eager=True,
            callback=_dir_after_verb,
            help="Work dir to use (as `looop -C DIR …`).",
        )
    )
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_dir(sub)


for _module in (init, beat, workers, claims, mailbox, loops, decider, admin, ops, docs, web):
    for _command in _module.COMMANDS:
        if _command.name != "init":  # `looop init DIR` names the directory it creates
            _accept_dir(_command)
        cli.add_command(_command)


def main() -> None:
    cli.main(prog_name="looop")


if __name__ == "__main__":  # pragma: no cover
    main()
