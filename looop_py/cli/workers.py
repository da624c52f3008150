"""Workers from the command line: worker start/kill/logs, workers, done."""

from __future__ import annotations

import sys
import time

import click

from looop_py.cli import worklines
from looop_py.cli.options import json_option, pass_paths, pass_workdir, session_option
from looop_py.cli.output import echo, json_line, json_out, raw_out, show
from looop_py.errors import UsageError
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths


@click.group()
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
@pass_workdir
def worker_start(
    wd: WorkDir,
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
      looop worker start fix-1 "Fix issue 1" --workspace git-worktree --json | jq .pid
    """
    from looop_py.workers import launch

    if prompt is None or prompt == "-":
        if prompt is None and sys.stdin.isatty():
            raise UsageError("no prompt", "pass it as an argument, or pipe it in with `-`")
        prompt = sys.stdin.read()
    started = launch.start(
        wd,
        worker_id,
        prompt,
        runtime=runtime,
        verify=verify,
        workspace=workspace,
        now=time.time(),
        refuse_prose=True,
    )
    if as_json:
        json_out(started.to_json())
    else:
        show(worklines.started_lines(started))


@worker.command("kill")
@click.argument("worker_id", metavar="ID")
@click.option("--reason", help="Why; kept in sessions/ID/kill.json.")
@json_option
@pass_paths
def worker_kill(paths: Paths, worker_id: str, reason: str | None, as_json: bool) -> None:
    """End worker ID and everything it started: SIGTERM, then SIGKILL after the grace.

    \b
    Example:
      looop worker kill fix-ci --reason "stuck for an hour"
      looop worker kill fix-ci --json | jq .forced
    """
    from looop_py.workers import kill

    result = kill.kill(paths, worker_id, reason=reason)
    if as_json:
        json_out(result.to_json())
    else:
        show(worklines.kill_lines(result))


@worker.command("logs")
@click.argument("worker_id", metavar="ID")
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the worker ends.")
@click.option(
    "-n", "lines", type=click.IntRange(min=1), default=None, help="Only the last N lines."
)
@json_option
@pass_workdir
def worker_logs(
    wd: WorkDir, worker_id: str, follow: bool, lines: int | None, as_json: bool
) -> None:
    """Print a worker's output.log (its stdout and stderr), as it wrote it.

    --json prints {"id", "text"} (bytes that are not UTF-8 replaced); with -f,
    one such object per line as the output arrives (JSON Lines).

    \b
    Example:
      looop worker logs fix-ci -n 50
      looop worker logs fix-ci -f
      looop worker logs fix-ci --json | jq -r .text
    """
    import codecs

    from looop_py.workers.logs import read_log

    chunks = read_log(wd, worker_id, last=lines, follow=follow)
    if not as_json:
        for chunk in chunks:
            raw_out(chunk)
        return
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    if not follow:
        text = "".join(decoder.decode(chunk) for chunk in chunks) + decoder.decode(b"", True)
        json_out({"id": worker_id, "text": text})
        return
    for chunk in chunks:  # a character split across two reads is printed whole, once
        if text := decoder.decode(chunk):
            json_line({"id": worker_id, "text": text})
    if text := decoder.decode(b"", final=True):
        json_line({"id": worker_id, "text": text})


@click.command()
@click.option("--all", "show_all", is_flag=True, help="Also list ended workers.")
@json_option
@pass_workdir
def workers(wd: WorkDir, show_all: bool, as_json: bool) -> None:
    """List workers: health (busy, waiting-ask, stuck, dead), state, verify, result.

    Worktrees kept because they hold commits are listed after the workers.

    \b
    Example:
      looop workers
      looop workers --all --json | jq '.workers[] | select(.health == "stuck") | .id'
    """
    from looop_py.workers.fleet import fleet

    view = fleet(wd, time.time(), include_ended=show_all)
    if as_json:
        json_out(view.to_json())
    else:
        show(worklines.workers_lines(view, all_=show_all))


@click.command()
@click.option(
    "--status",
    "result_status",
    type=click.Choice(["done", "done-with-concerns", "blocked"]),
    default="done",
    show_default=True,
    help="How the task went.",
)
@click.option("--summary", metavar="TEXT", help="One line on what happened.")
@click.option(
    "--tokens", type=int, help="Tokens you spent in all, if your runtime does not report them."
)
@click.option("--input-tokens", type=int, help="Of those, the tokens you sent (prompts, context).")
@click.option("--output-tokens", type=int, help="Of those, the tokens the model wrote.")
@click.option("--cost-usd", type=float, help="What you spent, in USD.")
@session_option
@json_option
@pass_paths
def done(
    paths: Paths,
    *,
    result_status: str,
    summary: str | None,
    tokens: int | None,
    input_tokens: int | None,
    output_tokens: int | None,
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
    from looop_py.workers import records

    if not session:
        raise UsageError(
            "no session", "run this inside a worker ($LOOOP_SESSION_ID) or pass --session"
        )
    result = records.report(
        paths,
        session,
        status=result_status,
        summary=summary,
        tokens=tokens,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost_usd,
        now=time.time(),
    )
    if as_json:
        json_out({"id": session, **result})
    else:
        echo(worklines.done_line(session, result_status))


COMMANDS = [worker, workers, done]
