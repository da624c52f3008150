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
    from looop_py.workdir.paths import Paths

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
    from looop_py.workdir.template import init as do_init

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
    from looop_py.beat.pulse import preview

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
    from looop_py.beat.views import status as build

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
    _echo_limits(view["limits"])


def _echo_limits(lim: dict[str, Any]) -> None:
    cap = lim["decides_per_hour"] or "no cap"
    echo(f"decides     {lim['decides_last_hour']} in the last hour (cap {cap})")
    tokens = f"{lim['tokens_today']}" + (
        f" of {lim['daily_tokens']}" if lim["daily_tokens"] else ""
    )
    usd = f"${lim['usd_today']:.4f}" + (f" of ${lim['daily_usd']:.2f}" if lim["daily_usd"] else "")
    echo(f"spend today {tokens} tokens, {usd}")
    if lim["backoff"]:
        b = lim["backoff"]
        when = f"retry in {b['retry_in_s']}s"
        echo(f"backoff     {b['fails']} failure(s) in a row, {when}: {b['reason']}")
    if lim["flapping"]:
        echo(f"flapping    {', '.join(lim['flapping'])}")
    if lim["pending_asks"]:
        echo(f"asks        {lim['pending_asks']} waiting on a human (looop asks)")
    if lim["blocked"]:
        echo(f"held        the decider will not be called now: {lim['blocked']}")


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
    from looop_py.beat.views import why as build

    view = build(state.paths)
    if as_json:
        json_out(view)
        return
    if view.get("ts"):
        echo(f"last beat {view['ts']}: {view['outcome']}")
    echo(view["explanation"])
    if view.get("limits", {}).get("blocked"):
        echo(f"right now: {view['limits']['blocked']}")
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
    from looop_py.workdir import journal

    tail = journal.tail(state.paths, lines)
    if as_json:
        json_out({"lines": tail})
        return
    for line in tail:
        echo(line)
    if not tail:
        echo("(the journal is empty: no move has been made yet)", err=True)


# -- the human mailbox ---------------------------------------------------------------


@cli.command()
@click.option("--prompt", "prompt_text", required=True, help="The question for a human.")
@click.option("--options", help="Comma-separated choices the answer must be one of.")
@click.option("--ref", help="A file the human should look at (path relative to the work dir).")
@click.option("--timeout", type=float, help="Give up after S seconds (exit 4; the ask stays).")
@click.pass_obj
def ask(
    state: State, prompt_text: str, options: str | None, ref: str | None, timeout: float | None
) -> None:
    """Ask a human and wait: prints only the answer, so $(looop ask …) is the answer.

    The asker is $LOOOP_SESSION_ID inside a worker, else "human".

    \b
    Example:
      answer=$("$LOOOP_BIN" ask --prompt "Merge PR 12 now?" --options yes,no)
    """
    import os
    import time

    from looop_py.workdir import mailbox

    asker = os.environ.get("LOOOP_SESSION_ID") or "human"
    choices = tuple(o.strip() for o in options.split(",") if o.strip()) if options else ()
    filed = mailbox.open_ask(
        state.paths, prompt=prompt_text, asker=asker, now=time.time(), options=choices, ref=ref
    )
    echo(f"looop: waiting for an answer to {filed.id} (looop answer {filed.id} …)", err=True)
    try:
        got = mailbox.wait(state.paths, filed.id, timeout_s=timeout)
    except mailbox.AskError as exc:
        echo(f"looop: {exc}", err=True)
        sys.exit(4)
    echo(got.text)


# -- workers ---------------------------------------------------------------------


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


@cli.group()
def worker() -> None:
    """Start, stop and read detached workers (agent sessions that outlive the beat).

    \b
    Example:
      looop worker start fix-ci "Make the CI green" --runtime claude
      looop worker logs fix-ci -f
      looop worker kill fix-ci
    """


@worker.command("start")
@click.argument("worker_id", metavar="ID")
@click.argument("prompt", required=False)
@click.option("--runtime", help="claude | codex | pi | aider | shell | a [runtimes.NAME].")
@click.option("--verify", metavar="CMD", help="Run once from the work dir after it dies.")
@click.option(
    "--workspace",
    type=click.Choice(["none", "git-worktree"]),
    default="none",
    show_default=True,
    help="git-worktree: start in a worktree on branch looop/ID.",
)
@json_option
@click.pass_obj
def worker_start(
    state: State,
    *,
    worker_id: str,
    prompt: str | None,
    runtime: str | None,
    verify: str | None,
    workspace: str,
    as_json: bool,
) -> None:
    """Start worker ID, detached: it keeps running after this command returns.

    PROMPT is its task; `-` or nothing reads it from stdin. The worker
    contract (how to ask, claim, deliver and finish) is put before it.
    Refused when ID is alive or the fleet cap is reached.

    \b
    Example:
      looop worker start tidy "Summarize open PRs into reports/prs.md" --runtime claude
      echo 'make test > reports/t.txt' | looop worker start t - --verify 'test -s reports/t.txt'
      looop worker start fix-1 "Fix issue 1" --workspace git-worktree
    """
    import time

    from looop_py.errors import UsageError
    from looop_py.workdir import config as config_mod
    from looop_py.workers import launch

    if prompt is None or prompt == "-":
        if prompt is None and sys.stdin.isatty():
            raise UsageError("no prompt", "pass it as an argument, or pipe it in with `-`")
        prompt = sys.stdin.read()
    paths = state.paths
    cfg = config_mod.load(paths.config, paths.config_cache)
    started = launch.start(
        paths,
        cfg,
        worker_id,
        prompt,
        runtime=runtime,
        verify=verify,
        workspace=workspace,
        now=time.time(),
    )
    if as_json:
        json_out(started.to_json())
        return
    echo(f"started {started.id} (pid {started.pid}, runtime {started.runtime}, cwd {started.cwd})")
    echo(f"  logs: looop worker logs {started.id} -f")
    echo(f"  stop: looop worker kill {started.id}")


@worker.command("kill")
@click.argument("worker_id", metavar="ID")
@click.option("--reason", help="Why; kept in sessions/ID/kill.json.")
@json_option
@click.pass_obj
def worker_kill(state: State, worker_id: str, reason: str | None, as_json: bool) -> None:
    """End worker ID and everything it started: SIGTERM, then SIGKILL after the grace.

    \b
    Example:
      looop worker kill fix-ci --reason "stuck for an hour"
    """
    from looop_py.workers import kill

    result = kill.kill(state.paths, worker_id, reason=reason)
    if as_json:
        json_out(
            {
                "id": result.id,
                "was_alive": result.was_alive,
                "state": result.state,
                "exit_code": result.exit_code,
                "forced": result.forced,
            }
        )
        return
    if not result.was_alive:
        echo(f"{worker_id} was not running ({result.state}, exit {result.exit_code})")
        return
    how = " (needed SIGKILL)" if result.forced else ""
    echo(f"killed {worker_id}{how}: {result.state}, exit {result.exit_code}")


@worker.command("logs")
@click.argument("worker_id", metavar="ID")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the worker ends.")
@click.option("-n", "lines", type=int, default=None, help="Only the last N lines.")
@click.pass_obj
def worker_logs(state: State, worker_id: str, follow: bool, lines: int | None) -> None:
    """Print a worker's output.log (its stdout and stderr).

    \b
    Example:
      looop worker logs fix-ci -n 50
      looop worker logs fix-ci -f
    """
    import time

    from looop_py import jsonio
    from looop_py.workers import records

    paths = state.paths
    view = records.get(paths, worker_id, time.time())
    log = records.session_dir(paths, worker_id) / records.OUTPUT
    out = sys.stdout.buffer
    if lines is not None:
        out.write(b"".join(line + b"\n" for line in jsonio.tail_lines(log, lines)))
        pos = log.stat().st_size if log.exists() else 0
    else:
        pos = 0
    out.flush()
    alive = view.alive
    while True:
        try:
            with log.open("rb") as f:
                f.seek(pos)
                chunk = f.read()
        except FileNotFoundError:
            chunk = b""
        if chunk:
            out.write(chunk)
            out.flush()
            pos += len(chunk)
        if not follow or not alive:
            return
        time.sleep(0.2)
        alive = records.get(paths, worker_id, time.time()).alive


@cli.command()
@click.option("--all", "show_all", is_flag=True, help="Also list ended workers.")
@json_option
@click.pass_obj
def workers(state: State, show_all: bool, as_json: bool) -> None:
    """List workers: health (busy, waiting-ask, stuck, dead), state, verify, result.

    Worktrees kept because they hold commits are listed after the workers.

    \b
    Example:
      looop workers
      looop workers --all --json | jq '.workers[] | select(.health == "stuck") | .id'
    """
    import time

    from looop_py.workdir import config as config_mod
    from looop_py.workers import reap, records

    paths = state.paths
    cfg = config_mod.load(paths.config, paths.config_cache)
    views = records.list_sessions(paths, time.time())
    live = {v.id for v in views if v.alive}
    shown = views if show_all else [v for v in views if v.alive]
    kept = [k for k in reap.kept_worktrees(paths, cfg) if k["id"] not in live]
    if as_json:
        json_out(
            {
                "workers": [v.to_json() for v in shown],
                "live": len(live),
                "max_live": cfg.workers.max_live,
                "kept_worktrees": kept,
            }
        )
        return
    if not shown:
        echo("no live workers" + ("" if show_all else " (--all lists ended ones)"))
    else:
        echo(
            f"{'ID':<24} {'HEALTH':<11} {'STATE':<8} {'EXIT':>4} {'UP':>5} {'IDLE':>5} "
            f"{'RUNTIME':<8} {'VERIFY':<6} RESULT"
        )
    for v in shown:
        code = "-" if v.exit_code is None else str(v.exit_code)
        result = (v.result or {}).get("status") or "-"
        echo(
            f"{v.id:<24} {v.health:<11} {v.state:<8} {code:>4} {_age(v.uptime_s):>5} "
            f"{_age(v.idle_s if v.alive else None):>5} {v.runtime or '-':<8} "
            f"{v.verify or '-':<6} {result}"
        )
    echo(f"{len(live)}/{cfg.workers.max_live} live", err=True)
    for k in kept:
        echo(f"kept worktree {k['path']} (branch {k['branch']}): {k['reason'] or 'holds work'}")


# -- claims ----------------------------------------------------------------------


def _session_option(f: F) -> F:
    return click.option(
        "--session",
        envvar="LOOOP_SESSION_ID",
        help="Holder session (default: $LOOOP_SESSION_ID).",
    )(f)


def _pid_option(f: F) -> F:
    return click.option(
        "--pid",
        type=int,
        help="Process whose life the claim follows (default: the worker, else the caller).",
    )(f)


@cli.command()
@click.argument("name")
@_session_option
@click.option("--ttl", type=float, metavar="S", help="Expire after S seconds unless renewed.")
@click.option("--renew", is_flag=True, help="Owner only: push the expiry to now + ttl.")
@_pid_option
@json_option
@click.pass_obj
def claim(
    state: State,
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
    """
    import time

    from looop_py.claims import holders
    from looop_py.claims import lease as claims

    paths = state.paths
    holder = holders.resolve_holder(paths, session or None, pid)
    outcome = claims.claim(paths, name, holder, ttl_s=ttl, renew=renew, now=time.time())
    if as_json:
        json_out({**outcome.claim.to_json(), "action": outcome.action})
        return
    echo(str(outcome.claim.epoch))


@cli.command()
@click.argument("name")
@_session_option
@_pid_option
@json_option
@click.pass_obj
def unclaim(state: State, name: str, session: str | None, pid: int | None, as_json: bool) -> None:
    """Release the lease NAME (harmless if it is not held). Exit 4 if another live holder has it.

    \b
    Example:
      looop unclaim repo-main
    """
    import time

    from looop_py.claims import holders
    from looop_py.claims import lease as claims

    paths = state.paths
    holder = holders.resolve_holder(paths, session or None, pid)
    released = claims.unclaim(paths, name, holder, now=time.time())
    if as_json:
        json_out({"name": name, "released": released.to_json() if released else None})
        return
    if released is None:
        echo(f"{name} was not claimed", err=True)


@cli.command()
@json_option
@click.pass_obj
def asks(state: State, as_json: bool) -> None:
    """List the asks waiting on a human (questions and approvals).

    \b
    Example:
      looop asks
      looop asks --json | jq -r '.asks[].id'
    """
    import time

    from looop_py.workdir import mailbox

    now = time.time()
    pending = mailbox.pending(state.paths)
    if as_json:
        json_out({"asks": [{**a.to_json(), "age_s": round(now - a.created_at)} for a in pending]})
        return
    if not pending:
        echo("no pending asks")
    for a in pending:
        verb = "approve or deny" if a.kind == "approval" else "answer"
        echo(f"{a.id}  [{a.kind} from {a.asker}, {round(now - a.created_at)}s ago]  ({verb})")
        for line in a.prompt.strip().splitlines():
            echo(f"    {line}")
        if a.options:
            echo(f"    options: {', '.join(a.options)}")


@cli.command()
@click.argument("ask_id")
@click.argument("text", required=False)
@click.option("--force", is_flag=True, help="Replace an existing answer.")
@click.pass_obj
def answer(state: State, ask_id: str, text: str | None, force: bool) -> None:
    """Answer a question; TEXT or - reads the answer from stdin.

    \b
    Example:
      looop answer w1-3 "yes, go ahead"
      echo "use the staging DB" | looop answer w1-4 -
    """
    import time

    from looop_py.workdir import mailbox

    if text is None or text == "-":
        text = sys.stdin.read().strip()
    if not text:
        raise click.UsageError("the answer is empty")
    mailbox.answer(state.paths, ask_id, text, now=time.time(), force=force)
    echo(f"answered {ask_id}")


@cli.command()
@click.argument("ask_id")
@click.pass_obj
def approve(state: State, ask_id: str) -> None:
    """Approve a held move: looop runs it now and journals what happened.

    \b
    Example:
      looop asks            # find the approval, e.g. decider-2
      looop approve decider-2
    """
    import time

    from looop_py.moves.approvals import approve as do_approve

    got = do_approve(state.paths, ask_id, now=time.time())
    echo(f"approved {ask_id}: {got.note}")
    if got.note and got.note.startswith("failed"):
        sys.exit(1)


@cli.command()
@click.argument("ask_id")
@click.option("--reason", help="Why; the decider sees it in the journal.")
@click.pass_obj
def deny(state: State, ask_id: str, reason: str | None) -> None:
    """Refuse a held move; nothing runs.

    \b
    Example:
      looop deny decider-2 --reason "not during the release freeze"
    """
    import time

    from looop_py.moves.approvals import deny as do_deny

    do_deny(state.paths, ask_id, now=time.time(), reason=reason)
    echo(f"denied {ask_id}")


@cli.command()
@json_option
@click.pass_obj
def claims(state: State, as_json: bool) -> None:
    """List claims: who holds which name, its epoch, age and expiry.

    \b
    Example:
      looop claims
      looop claims --json | jq '.claims[] | select(.live) | .name'
    """
    import time

    from looop_py.claims import reaper

    now = time.time()
    views = reaper.list_claims(state.paths, now)
    if as_json:
        json_out({"claims": [v.to_json() for v in views]})
        return
    if not views:
        echo("no claims")
        return
    echo(f"{'NAME':<24} {'SESSION':<20} {'PID':>7} {'EPOCH':>5} {'AGE':>5} {'EXPIRES':>7} LIVE")
    for v in views:
        c = v.claim
        if c is None:
            echo(f"{v.name:<24} (unreadable)")
            continue
        expires = "-" if c.expires_at is None else _age(max(0.0, c.expires_at - now))
        echo(
            f"{v.name:<24} {c.session or '-':<20} {c.pid or '-':>7} {c.epoch:>5} "
            f"{_age(now - c.acquired_at):>5} {expires:>7} "
            + ("yes" if v.live else "no (reaped next beat)")
        )


# -- done ------------------------------------------------------------------------


@cli.command()
@click.option(
    "--status",
    "result_status",
    type=click.Choice(["done", "done-with-concerns", "blocked"]),
    default="done",
    show_default=True,
)
@click.option("--summary", metavar="TEXT", help="One line on what happened.")
@click.option("--tokens", type=int, help="Tokens you spent, if your runtime does not report them.")
@click.option("--cost-usd", type=float, help="What you spent, in USD.")
@_session_option
@json_option
@click.pass_obj
def done(
    state: State,
    *,
    result_status: str,
    summary: str | None,
    tokens: int | None,
    cost_usd: float | None,
    session: str | None,
    as_json: bool,
) -> None:
    """A worker reports how its task went (writes sessions/ID/result.json).

    Exiting 0 alone never means success: the loop reads this report.

    \b
    Example:
      "$LOOOP_BIN" done --summary "opened PR #12"
      "$LOOOP_BIN" done --status blocked --summary "needs a deploy key"
    """
    import time

    from looop_py.errors import UsageError
    from looop_py.workers import records

    if not session:
        raise UsageError(
            "no session", "run this inside a worker ($LOOOP_SESSION_ID) or pass --session"
        )
    result = records.report(
        state.paths,
        session,
        status=result_status,
        summary=summary,
        tokens=tokens,
        cost_usd=cost_usd,
        now=time.time(),
    )
    if as_json:
        json_out({"id": session, **result})
        return
    echo(f"{session}: recorded {result_status}")


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


# -- loops ---------------------------------------------------------------------------


@cli.command()
@json_option
@click.pass_obj
def loops(state: State, as_json: bool) -> None:
    """List the loops (goals whose frontmatter makes them one): level, cadence, next fire,
    last outcome and tokens spent.

    \b
    Example:
      looop loops
      looop loops --json | jq '.loops[] | {name, next_fire}'
    """
    import time

    from looop_py.loops.views import overview

    view = overview(state.paths, time.time())
    if as_json:
        json_out(view.to_json())
        return
    if not view.loops and not view.errors:
        echo("no loops yet: `looop patterns` lists ready-made ones, `looop new NAME` writes one")
    for lp in view.loops:
        echo(
            f"{lp.name:<22} {lp.level:<14} {lp.cadence:<18} next {lp.next_fire or '-':<20}"
            f" last {lp.last_outcome or '-':<16} {lp.tokens} tokens"
        )
    for goal, err in view.errors.items():
        echo(f"✗ goals/{goal}.md: {err}", err=True)


@cli.command(name="run")
@click.argument("loop")
@click.option("--wait", is_flag=True, help="Also wait for a human's approval if it escalates.")
@json_option
@click.pass_obj
def run_loop(state: State, loop: str, wait: bool, as_json: bool) -> None:
    """Run one round of LOOP in the foreground and print its report.

    The same round the pulse would run (workers, claim, gate, memory); it
    returns when the round ends or, unless --wait, when it asks a human.

    \b
    Example:
      looop run daily-triage
      looop run ci-sweeper --json | jq .outcome
    """
    from looop_py.loops import advance
    from looop_py.workdir import config as config_mod

    cfg = config_mod.load(state.paths.config, state.paths.config_cache)
    report = advance.run(state.paths, cfg, loop, wait_for_human=wait)
    if as_json:
        json_out(report.to_dict())
    else:
        sys.stdout.write(report.render())
    if report.outcome is not None and report.outcome.value == "failed":
        sys.exit(1)


@cli.command()
@click.option("--all", "show_all", is_flag=True, help="Also list finished rounds.")
@json_option
@click.pass_obj
def rounds(state: State, show_all: bool, as_json: bool) -> None:
    """List loop rounds: live ones (where each is), or all with --all.

    \b
    Example:
      looop rounds
      looop rounds --all --json | jq '.rounds[] | {id, outcome}'
    """
    from looop_py.loops.views import list_rounds

    rows = list_rounds(state.paths, include_done=show_all)
    if as_json:
        json_out({"rounds": [r.to_json() for r in rows]})
        return
    if not rows:
        echo("no live rounds" + ("" if show_all else " (--all shows finished ones)"))
    for r in rows:
        echo(f"{r.id:<40} {r.phase:<18} {r.outcome or '-':<16} {r.tokens} tokens")
        if r.ask:
            echo(f"    waiting on a human: looop approve {r.ask}  /  looop deny {r.ask}")


@cli.command()
@json_option
def patterns(as_json: bool) -> None:
    """List the seven ready-made loop patterns.

    \b
    Example:
      looop patterns
      looop new ci-sweeper
    """
    from looop_py.engine import patterns as catalogue

    specs = catalogue.catalogue()
    if as_json:
        json_out({"patterns": [s.to_dict() for s in specs]})
        return
    for spec in specs:
        echo(f"{spec.name:<20} {spec.level.label:<14} {spec.cadence:<12} {spec.action_kind:<12}")
        echo(f"    {spec.intent}")


@cli.command()
@click.argument("pattern")
@click.option("--name", help="Goal id to write (default: the pattern's name).")
@click.pass_obj
def new(state: State, pattern: str, name: str | None) -> None:
    """Write a goal file from a pattern, ready to edit (never overwrites).

    \b
    Example:
      looop new daily-triage
      looop new ci-sweeper --name ci-main
    """
    import os
    from dataclasses import replace

    from looop_py.engine import patterns as catalogue
    from looop_py.errors import UsageError
    from looop_py.loops.specs import goal_text

    spec = catalogue.by_name(pattern)
    if name:
        spec = replace(spec, name=name)
    path = state.paths.goal(spec.name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise UsageError(f"{path} already exists", "pick another id with --name") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(goal_text(spec))
    echo(f"wrote goals/{spec.name}.md ({spec.level.label}, {spec.cadence}); edit it, then")
    echo(f"try it: looop run {spec.name}")


def main() -> None:
    cli.main(prog_name="looop")


if __name__ == "__main__":  # pragma: no cover
    main()
