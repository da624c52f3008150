"""The `looop` command: click parses, one core function runs, this module renders.

Exit codes a cron job can rely on:
  0  done (for `pulse`: skipped, decided or locked)
  1  the command ran and failed (a failed beat, a refused move)
  2  usage: bad arguments, no work dir, bad looop.toml
  3  busy: a lock another process holds
  70 a bug in looop; the traceback goes to state/errors.log, not to cron mail
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from looop_py import __version__
from looop_py.console import echo, json_out, pulse_command, report_error, resolve
from looop_py.errors import LooopError

if TYPE_CHECKING:
    from looop_py.paths import Paths

F = TypeVar("F", bound=Callable[..., Any])


class State:
    """Per-invocation context: the work dir is resolved only by commands that need one."""

    def __init__(self, workdir: str | None) -> None:
        self.workdir = workdir
        self._paths: Paths | None = None

    @property
    def paths(self) -> Paths:
        if self._paths is None:
            self._paths = resolve(self.workdir)
        return self._paths


class LooopGroup(click.Group):
    """Maps LooopError to its exit code and a bug to a logged traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except (LooopError, KeyboardInterrupt, Exception) as exc:
            state = ctx.find_object(State)
            ctx.exit(report_error(exc, state.workdir if state else None))


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(f)


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
      looop pulse            # one beat; put it in cron: * * * * * looop -C ~/ops pulse
      looop status
    """
    ctx.obj = State(workdir)


# -- init ------------------------------------------------------------------------


@cli.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False, path_type=Path))
@json_option
def init(directory: Path, as_json: bool) -> None:
    """Create a work dir from the starter template (never overwrites a file).

    \b
    Example:
      looop init ~/ops      # creates looop.toml, PLAYBOOK.md, goals/, sensors/ …
      looop init ~/ops      # again: keeps every existing file, adds what is missing
    """
    from looop_py.workdir import init as do_init

    result = do_init(directory)
    if as_json:
        json_out(
            {
                "work_dir": str(result.root),
                "created": [str(p.relative_to(result.root)) for p in result.created],
                "kept": [str(p.relative_to(result.root)) for p in result.kept],
                "agent_clis": list(result.agent_clis),
            }
        )
        return
    for p in result.created:
        suffix = "/" if p.is_dir() else ""
        echo(f"  created {p.relative_to(result.root)}{suffix}")
    if result.kept:
        echo(f"  kept {len(result.kept)} existing file(s) as they were")
    if not result.created:
        echo(f"{result.root} is already a complete work dir; nothing to do")
    else:
        echo(f"work dir ready: {result.root}")
        if result.agent_clis:
            echo(
                f"found {', '.join(result.agent_clis)} on PATH: looop.toml [decider] has a"
                " ready, commented block for each (the default stays the offline rules decider)"
            )
        echo(f"next: looop -C {result.root} pulse")


# -- pulse / sense ---------------------------------------------------------------


@cli.command()
@json_option
@click.option("--force", is_flag=True, help="Decide even if the world is unchanged.")
@click.option("-v", "--verbose", is_flag=True, help="Also show each sensor on stderr.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing unless the beat failed.")
@click.pass_obj
def pulse(state: State, as_json: bool, force: bool, verbose: bool, quiet: bool) -> None:
    """Run one beat: sense, hash, and decide only if the world changed.

    Quiet on stdout when nothing happened and stdout is not a terminal, so
    cron mails you only when the loop acted. Exits 0 for skipped, decided and
    locked beats, 1 for a failed one.

    \b
    Example:
      looop pulse                 # one beat
      looop pulse --json          # outcome, world_hash, changed, sensors, ms
      * * * * * looop -C ~/ops pulse     # crontab line
    """
    code = pulse_command(state.paths, as_json=as_json, force=force, verbose=verbose, quiet=quiet)
    sys.exit(code)


@cli.command()
@json_option
@click.pass_obj
def sense(state: State, as_json: bool) -> None:
    """Run the sensors now and show readings and what would change.

    Writes snapshots but decides and commits nothing, so the next
    `looop pulse` still sees the same changes.

    \b
    Example:
      looop sense
      looop sense --json | jq '.changed'
    """
    from looop_py.pulse import preview

    view = preview(state.paths)
    if as_json:
        json_out(view)
        return
    for stem, snap in view["snapshots"].items():
        mark = "✗" if stem in view["failed"] else "·"
        echo(f"{mark} {stem}: {_compact(snap.get('signal'))}")
    if view["changed"]:
        echo(f"would wake the decider: {len(view['changed'])} item(s) changed")
        for c in view["changed"]:
            echo(f"  {c['item']}: {c['old']} → {c['new']}")
    else:
        echo("would skip: the world is unchanged since the last decision")


def _compact(value: Any, limit: int = 100) -> str:
    from looop_py import jsonio

    text = jsonio.canonical(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- status / why / journal ------------------------------------------------------


@cli.command()
@json_option
@click.pass_obj
def status(state: State, as_json: bool) -> None:
    """Show the last beat, the committed world hash, sensor health and counts.

    \b
    Example:
      looop status
      looop status --json | jq .sensors.failed
    """
    from looop_py.report import status as build

    view = build(state.paths)
    if as_json:
        json_out(view)
        return
    last = view["last_beat"]
    echo(f"work dir    {view['work_dir']}")
    echo(f"pulse       {'running now' if view['pulse_running'] else 'idle'}")
    if last:
        echo(f"last beat   {last.get('ts')} {last.get('outcome')} ({last.get('ms')} ms)")
    else:
        echo("last beat   none yet (run `looop pulse`)")
    echo(f"world hash  {view['world_hash'] or 'none committed yet'}")
    s = view["sensors"]
    line = f"sensors     {len(s['ok'])} ok, {len(s['failed'])} failed"
    echo(line + (f": {', '.join(s['failed'])}" if s["failed"] else ""))
    c = view["counts"]
    echo(f"goals       {c['goals']}   sessions {c['sessions']}   claims {c['claims']}")


@cli.command()
@json_option
@click.pass_obj
def why(state: State, as_json: bool) -> None:
    """Explain the last beat: why it skipped or woke, and what changed (old → new).

    \b
    Example:
      looop why
      looop why --json | jq '.changed[].item'
    """
    from looop_py.report import why as build

    view = build(state.paths)
    if as_json:
        json_out(view)
        return
    if view.get("ts"):
        echo(f"last beat {view['ts']}: {view['outcome']}")
    echo(view["explanation"])
    for c in view.get("changed", []):
        if c.get("old") is None:
            echo(f"  + {c['item']} appeared: {c.get('new')}")
        elif c.get("new") is None:
            echo(f"  - {c['item']} gone (was {c.get('old')})")
        else:
            echo(f"  ~ {c['item']}: {c.get('old')} → {c.get('new')}")


@cli.command(name="journal")
@click.option("-n", "lines", default=20, show_default=True, help="How many lines to show.")
@json_option
@click.pass_obj
def journal_cmd(state: State, lines: int, as_json: bool) -> None:
    """Show the newest lines of journal.md: one line per executed move.

    \b
    Example:
      looop journal -n 50
    """
    from looop_py import journal

    tail = journal.tail(state.paths, lines)
    if as_json:
        json_out({"lines": tail})
        return
    for line in tail:
        echo(line)
    if not tail:
        echo("(the journal is empty: no move has been made yet)", err=True)


# -- decider ---------------------------------------------------------------------


@cli.group()
def decider() -> None:
    """Check the decider configured in looop.toml [decider].

    \b
    Example:
      looop decider test
    """


@decider.command(name="test")
@json_option
@click.pass_obj
def decider_test(state: State, as_json: bool) -> None:
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

    view = run_test(state.paths, time.time())
    if as_json:
        json_out(view)
    else:
        echo(f"backend     {view['backend']}")
        echo(f"latency     {view['latency_ms']} ms")
        usage = view["usage"]
        if usage is None:
            echo("usage       not reported (unmetered)")
        else:
            cost = usage["cost_usd"]
            echo(
                f"usage       {usage['input_tokens']} in / {usage['output_tokens']} out"
                f" tokens, {'cost unknown' if cost is None else f'${cost:.6f}'}"
            )
        if view["error"]:
            echo(f"error       {view['error']}")
            if view.get("hint"):
                echo(f"            → {view['hint']}")
        else:
            echo(f"move        {_compact(view['move'], 200)}")
            if view["invalid"]:
                echo(f"invalid     {view['invalid']}")
            else:
                echo("valid       yes")
    sys.exit(0 if view["ok"] else 1)


def main() -> None:
    cli.main(prog_name="looop")


if __name__ == "__main__":  # pragma: no cover
    main()
