"""Lines for the work in play: the human mailbox, workers and claims.

The `ask`/`answer`/`asks`, `worker` and `claims` commands' views turned into human
lines (or the object `--json` prints); the rest of the CLI's views are in render.py.
No click, no printing.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from looop_py.cli.output import Note
from looop_py.cli.render import age

if TYPE_CHECKING:
    from looop_py.asks.mailbox import Answer, AskView
    from looop_py.coord.reaper import ClaimView
    from looop_py.workers.fleet import Fleet
    from looop_py.workers.kill import KillResult
    from looop_py.workers.records import Session

    Lines = list[str]


# -- the human mailbox -----------------------------------------------------------------------


def ask_waiting(ask_id: str) -> Lines:
    return [Note(f"looop: waiting for an answer to {ask_id} (looop answer {ask_id} …)")]


def answer_json(ask_id: str, got: Answer) -> dict[str, Any]:
    """`answer`, `approve`, `deny`, `ask --json`: the answer as answers/ID.json holds it."""
    record = dataclasses.asdict(got)
    return {"id": ask_id, "answer": record.pop("text"), **record}


def asks_json(views: list[AskView], now: float) -> dict[str, Any]:
    return {
        "asks": [
            {
                **v.ask.to_json(),
                "age_s": round(now - v.ask.created_at),
                "state": v.state,
                "why": v.why,
            }
            for v in views
        ]
    }


def asks_lines(views: list[AskView], now: float) -> Lines:
    lines = [] if views else ["no pending asks"]
    for v in views:
        a = v.ask
        verb = "approve or deny" if a.kind == "approval" else "answer"
        if v.state != "pending":
            verb = f"{v.state}: {v.why or 'nobody waits for it'}; looop withdraw {a.id}"
        lines.append(
            f"{a.id}  [{a.kind} from {a.asker}, {round(now - a.created_at)}s ago]  ({verb})"
        )
        lines += [f"    {line}" for line in a.prompt.strip().splitlines()]
        if a.options:
            lines.append(f"    options: {', '.join(a.options)}")
    return lines


def verdict_lines(ask_id: str, got: Answer) -> Lines:
    if got.verdict == "denied":
        return [f"denied {ask_id}"]
    if got.verdict == "approved":
        if got.note and got.note.startswith("nothing ran"):  # moves/approvals.py NOTHING_RAN
            return [f"approved {ask_id}; {got.note}"]
        return [f"approved {ask_id}: {got.note}"]
    if got.verdict == "withdrawn":  # asks/mailbox.py WITHDRAWN; never answered, never run
        why = f": {got.note}" if got.note and got.note != "withdrawn" else ""
        return [f"withdrew {ask_id}{why}"]
    return [f"answered {ask_id}"]


# -- workers ---------------------------------------------------------------------------------


def started_lines(started: Session) -> Lines:
    return [
        f"started {started.id} (pid {started.pid}, runtime {started.runtime}, cwd {started.cwd})",
        f"  logs: looop worker logs {started.id} -f",
        f"  stop: looop worker kill {started.id}",
    ]


def kill_lines(result: KillResult) -> Lines:
    if not result.was_alive:
        return [f"{result.id} was not running ({result.state}, exit {result.exit_code})"]
    how = " (needed SIGKILL)" if result.forced else ""
    return [f"killed {result.id}{how}: {result.state}, exit {result.exit_code}"]


def workers_lines(view: Fleet, *, all_: bool) -> Lines:
    """A table whose columns fit the longest id and runtime, then the fleet's count."""
    wid = max([24, *(len(v.id) for v in view.workers)])
    wrt = max([8, *(len(v.runtime or "-") for v in view.workers)])
    if not view.workers:
        lines = ["no live workers" + ("" if all_ else " (--all lists ended ones)")]
    else:
        lines = [
            f"{'ID':<{wid}} {'HEALTH':<11} {'STATE':<8} {'EXIT':>4} {'UP':>5} {'IDLE':>5} "
            f"{'RUNTIME':<{wrt}} {'VERIFY':<6} RESULT"
        ]
    for v in view.workers:
        code = "-" if v.exit_code is None else str(v.exit_code)
        lines.append(
            f"{v.id:<{wid}} {v.health:<11} {v.state:<8} {code:>4} {age(v.uptime_s):>5} "
            f"{age(v.idle_s if v.alive else None):>5} {v.runtime or '-':<{wrt}} "
            f"{v.verify or '-':<6} {(v.result or {}).get('status') or '-'}"
        )
    lines.append(f"{view.live}/{view.max_live} live")
    return lines + [
        f"kept worktree {k['path']} (branch {k['branch']}): {k['reason'] or 'holds work'}"
        for k in view.kept_worktrees
    ]


def done_line(session: str, status: str) -> str:
    return f"{session}: recorded {status}"


# -- claims ----------------------------------------------------------------------------------


def claims_lines(views: list[ClaimView], now: float) -> Lines:
    if not views:
        return ["no claims"]
    hosts = any(v.claim and v.claim.host for v in views)  # a shared backend: say where
    wn = max([24, *(len(v.name) for v in views)])
    ws = max([20, *(len(v.claim.session or "-") for v in views if v.claim)])
    head = f"{'NAME':<{wn}} {'SESSION':<{ws}} {'PID':>7} {'EPOCH':>5} {'AGE':>5} {'EXPIRES':>7} "
    lines = [head + ("HOST                 LIVE" if hosts else "LIVE")]
    for v in views:
        c = v.claim
        if c is None:
            lines.append(f"{v.name:<{wn}} (unreadable)")
            continue
        expires = "-" if c.expires_at is None else age(max(0.0, c.expires_at - now))
        lines.append(
            f"{v.name:<{wn}} {c.session or '-':<{ws}} {c.pid or '-':>7} {c.epoch:>5} "
            f"{age(now - c.acquired_at):>5} {expires:>7} "
            + (f"{c.host or '-':<20} " if hosts else "")
            + ("yes" if v.live else "no (reaped next beat)")
        )
    return lines
