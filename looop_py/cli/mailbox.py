"""The human mailbox from the command line: ask, asks, answer, approve, deny."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

import click

from looop_py.cli import worklines
from looop_py.cli.options import json_option, pass_workdir
from looop_py.cli.output import json_out, show

if TYPE_CHECKING:
    from looop_py.asks.mailbox import Answer
    from looop_py.workdir.context import WorkDir


@click.command()
@click.option("--prompt", "prompt_text", required=True, help="The question for a human.")
@click.option("--options", help="Comma-separated choices the answer must be one of.")
@click.option("--ref", help="A file the human should look at (path relative to the work dir).")
@click.option("--timeout", type=float, help="Give up after S seconds (exit 4; the ask stays).")
@json_option
@pass_workdir
def ask(
    wd: WorkDir,
    *,
    prompt_text: str,
    options: str | None,
    ref: str | None,
    timeout: float | None,
    as_json: bool,
) -> None:
    """Ask a human and wait: prints only the answer, so $(looop ask …) is the answer.

    The asker is $LOOOP_SESSION_ID inside a worker, else "human".

    \b
    Example:
      answer=$("$LOOOP_BIN" ask --prompt "Merge PR 12 now?" --options yes,no)
      "$LOOOP_BIN" ask --prompt "Which DB?" --timeout 600 --json | jq -r .answer
    """
    from looop_py.asks import mailbox

    asker = os.environ.get("LOOOP_SESSION_ID") or "human"
    choices = tuple(o.strip() for o in options.split(",") if o.strip()) if options else ()
    filed = mailbox.open_ask(
        wd,
        prompt=prompt_text,
        asker=asker,
        now=time.time(),
        options=choices,
        ref=ref,
        waiting=True,
    )
    show(worklines.ask_waiting(filed.id))
    got = mailbox.wait(wd, filed.id, timeout_s=timeout)  # NoAnswer: exit 4
    if as_json:
        json_out(worklines.answer_json(filed.id, got))
    else:
        show([got.text])


@click.command()
@json_option
@pass_workdir
def asks(wd: WorkDir, as_json: bool) -> None:
    """List the asks waiting on a human (questions and approvals).

    \b
    Example:
      looop asks
      looop asks --json | jq -r '.asks[].id'
    """
    from looop_py.asks import mailbox

    now = time.time()
    pending = mailbox.listing(wd)
    if as_json:
        json_out(worklines.asks_json(pending, now))
    else:
        show(worklines.asks_lines(pending, now))


@click.command()
@click.argument("ask_id")
@click.argument("text", required=False)
@click.option("--force", is_flag=True, help="Replace an existing answer.")
@json_option
@pass_workdir
def answer(wd: WorkDir, ask_id: str, text: str | None, force: bool, as_json: bool) -> None:
    """Answer a question; TEXT or - reads the answer from stdin.

    \b
    Example:
      looop answer w1-3 "yes, go ahead"
      echo "use the staging DB" | looop answer w1-4 -
    """
    from looop_py.asks import mailbox

    if text is None or text == "-":
        text = sys.stdin.read().strip()
    if not text:
        raise click.UsageError("the answer is empty")
    got = mailbox.answer(wd, ask_id, text, now=time.time(), force=force, by="cli")
    _report(ask_id, got, as_json)


@click.command()
@click.argument("ask_id")
@click.option(
    "--unverified",
    is_flag=True,
    help="Approve a loop's proposal its checker did not verify (a second, explicit yes).",
)
@json_option
@pass_workdir
def approve(wd: WorkDir, ask_id: str, unverified: bool, as_json: bool) -> None:
    """Approve a held move: looop runs it now and journals what happened.

    Exits 1 when the approved move ran and failed.

    \b
    Example:
      looop asks            # find the approval, e.g. decider-2
      looop approve decider-2
      looop approve decider-2 --json | jq -r .note
    """
    from looop_py.moves.approvals import approve as do_approve

    got = do_approve(wd, ask_id, now=time.time(), by="cli", unverified=unverified)
    _report(ask_id, got, as_json)
    if got.note and got.note.startswith("failed"):
        sys.exit(1)


@click.command()
@click.argument("ask_id")
@click.option("--reason", help="Why; the decider sees it in the journal.")
@json_option
@pass_workdir
def deny(wd: WorkDir, ask_id: str, reason: str | None, as_json: bool) -> None:
    """Refuse a held move; nothing runs.

    \b
    Example:
      looop deny decider-2 --reason "not during the release freeze"
    """
    from looop_py.moves.approvals import deny as do_deny

    got = do_deny(wd, ask_id, now=time.time(), reason=reason, by="cli")
    _report(ask_id, got, as_json)


def _report(ask_id: str, got: Answer, as_json: bool) -> None:
    if as_json:
        json_out(worklines.answer_json(ask_id, got))
    else:
        show(worklines.verdict_lines(ask_id, got))


@click.command()
@click.argument("ask_id")
@click.option("--reason", help="Why; kept with the answer.")
@json_option
@pass_workdir
def withdraw(wd: WorkDir, ask_id: str, reason: str | None, as_json: bool) -> None:
    """Withdraw an unanswered ask (a stranded or expired one, say): it leaves `looop asks`,
    and a withdrawn approval never runs.

    \b
    Example:
      looop asks            # … (stranded: its worker is gone; looop withdraw w1-3)
      looop withdraw w1-3 --reason "the worker was replaced"
    """
    from looop_py.asks import mailbox

    got = mailbox.withdraw(wd, ask_id, now=time.time(), reason=reason)
    _report(ask_id, got, as_json)


COMMANDS = [ask, asks, answer, approve, deny, withdraw]
