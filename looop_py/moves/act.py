"""Execute a validated move. looop acts; the model never does.

Every move first passes the one gate (gate.py): a move that could run code
no human allowed is held as an approval ask instead (`looop approve` carries
it out later, exactly as shown), and the tripwire refuses the catastrophic.
The one exception is a move that does nothing at all (UNGATED: noop): it runs
nothing, reads no file and needs no fence, and the gate's row for it admits it
always, so it is done without loading the gate (a full beat's fixed cost; the
gate imports the shell parser, the loop spec and the runtimes). The gate is
imported where the first move that can do anything is carried out.
Each move's effect is a small function below. Policy writes are atomic and
idempotent; moves that must not run twice (shell, spawn, ask) are wrapped in a
write-ahead record. Allowlisted shell commands run without a shell.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

from looop_py import jsonio, procs
from looop_py.errors import FenceLost, LooopError
from looop_py.moves import wal
from looop_py.moves.union import (
    ArchiveGoal,
    AskHuman,
    DropSchedule,
    KillWorker,
    Move,
    Noop,
    RunShell,
    StartRound,
    StartWorker,
    WriteGoal,
    WritePlaybook,
    WriteSchedule,
    WriteSensor,
)
from looop_py.records import record
from looop_py.schedules import timers
from looop_py.workdir import journal, shelf
from looop_py.workdir.config import Config
from looop_py.workdir.context import WorkDir
from looop_py.workdir.environ import child_env
from looop_py.workdir.paths import Paths
from looop_py.workdir.shelf import GOAL_ACTIVITY, Fencing

if TYPE_CHECKING:
    from looop_py.moves import gate

PLAYBOOK_KEEP = 20
SHELL_TAIL = 2048
OUTPUT_EXCERPT = 400  # characters of a command's output kept in its beat's event
# Moves done without the gate: each runs nothing, reads and writes nothing, needs no fence,
# and the gate admits it always (tests/moves/test_ungated.py holds the gate to that).
UNGATED: tuple[type, ...] = (Noop,)


# eq=True: tests compare them; a @record (records.py): frozen to mypy, cheap at import.
@record(eq=True)
class Outcome:
    """What carrying out a move did; a failure is an Outcome, not a raise."""

    ok: bool
    note: str = ""  # appended to the journal line: what happened
    held: str | None = None  # the approval ask id when a gate held the move back
    detail: dict[str, Any] = field(default_factory=dict)


def execute(wd: WorkDir, move: Move, now: float, *, approved: bool = False) -> Outcome:
    """Carry out one move. Failures are Outcomes, not exceptions, so they get journaled.

    `approved`: a human approved exactly this move (moves/approvals.py), so the
    gate does not hold it again (the tripwire still refuses).
    """
    a = move.action
    if isinstance(a, UNGATED):
        return Outcome(True)
    from looop_py.moves import gate  # every move that can do anything passes it

    fencing: Fencing | None = None
    try:
        admission = gate.admit(wd, move, now, approved=approved)
        verdict = admission.verdict
        if verdict.refused is not None:
            why = f"refused by the tripwire ({verdict.refused})"
            return Outcome(False, f"{why}; a human can run it by hand")
        if admission.held is not None:
            return Outcome(
                True, f"held for approval as {admission.held} ({verdict.why})", held=admission.held
            )
        fencing = wd.shelf.confirm(move.name)  # the fence, checked at the side effect
        outcome = _carry_out(wd, move, now, verdict, fencing, approved=approved)
        if fencing is not None:  # a shared backend: the act names the token it ran under
            token = f"token {fencing.token}"
            return replace(outcome, note=f"{outcome.note} · {token}" if outcome.note else token)
        return outcome
    except FenceLost as exc:
        _journal_lost(wd, move, now, exc, acted=fencing is not None)
        raise  # this beat lost the pulse (a shared backend): the whole beat ends, not the move
    except LooopError as exc:
        return Outcome(False, exc.message)
    except OSError as exc:  # a full disk, a permission problem: reported, state intact
        return Outcome(False, f"{type(exc).__name__}: {exc}")


def _journal_lost(wd: WorkDir, move: Move, now: float, exc: FenceLost, *, acted: bool) -> None:
    """Never hidden: a move decided but not acted for a lost fence, or one that started under
    its token and found the loss afterwards, is journaled with the token."""
    token = "?" if exc.token is None else exc.token
    what = move.summary()
    if acted:
        text = f"⚠ {what}: acted under token {token}, then lost the pulse: {exc.message}"
    else:
        text = f"✗ decided {what}, not acted: lost the pulse at token {token} ({exc.message})"
    journal.write(wd, wd.redact(text), now)
    journal.emit(wd, "move_fenced", now, move=move.name, token=exc.token, acted=acted)


def _carry_out(
    wd: WorkDir,
    move: Move,
    now: float,
    verdict: gate.Verdict,
    fencing: Fencing | None,
    *,
    approved: bool,
) -> Outcome:
    """The move's effect, the fence confirmed (on a shared backend) just before."""
    from looop_py.moves import gate  # loaded by execute already

    cfg = wd.config
    a = move.action
    match a:
        case Noop():
            return Outcome(True)
        case WriteGoal(id=goal_id, body=body):
            from looop_py.workdir import provenance  # hashlib: only for a goal written

            data = gate.with_newline(body).encode()
            jsonio.atomic_write(wd.paths.goal(goal_id), data)
            rel = f"goals/{goal_id}.md"
            provenance.record(wd.paths, rel, data, approved=approved, now=now)
            stamp_goal(wd, goal_id, now)
            return Outcome(True)
        case ArchiveGoal(id=goal_id):
            return _archive_goal(wd.paths, goal_id, now)
        case WriteSensor(name=name, script=script):
            wd.paths.sensors.mkdir(exist_ok=True)
            data = gate.sensor_text(script).encode()
            jsonio.atomic_write(wd.paths.sensor(name), data, mode=0o755)
            return Outcome(True)
        case WritePlaybook(body=body):
            _keep_playbook_history(wd.paths, now)
            jsonio.atomic_write(wd.paths.playbook, gate.with_newline(body).encode())
            return Outcome(True)
        case WriteSchedule(name=name, in_s=in_s, every_s=every_s, cron=cron):
            timers.write(wd, name, now=now, in_s=in_s, every_s=every_s, cron=cron)
            return Outcome(True)
        case DropSchedule(name=name):
            gone = timers.drop(wd, name)
            return Outcome(True, "" if gone else "(no such schedule)")
        case RunShell(cmd=cmd):
            argv = list(verdict.argv) if verdict.argv else ["bash", "-c", cmd]
            return _run_shell(wd.paths, cfg, move, now, argv, fencing=fencing)
        case AskHuman(prompt=prompt, options=options):
            return _guarded(wd, move, now, lambda: _ask(wd, prompt, options, now))
        case StartWorker() | KillWorker():
            run = lambda: _workers(wd, move, now, verdict.verify, fencing)  # noqa: E731
            return _guarded(wd, move, now, run)
        case StartRound():
            return _guarded(wd, move, now, lambda: _start_round(wd, move, now))
    raise AssertionError(f"unhandled move {move.name}")  # pragma: no cover


def _guarded(wd: WorkDir, move: Move, now: float, run: Any) -> Outcome:
    wal.begin(wd.paths, move.to_json(), now)
    try:
        result: Outcome = run()
    finally:
        wal.end(wd.paths)
    return result


# -- goals and the playbook -------------------------------------------------------------


def stamp_goal(wd: WorkDir, goal_id: str, now: float) -> None:
    """Record that a goal was acted on; feeds the fairness section and sys-goals."""
    box = wd.shelf  # state/goal-activity.json; shared on etcd, like the world
    ledger = shelf.read_object(box, "state", GOAL_ACTIVITY) or {}
    goals = ledger.get("goals")
    acted = dict(goals) if isinstance(goals, dict) else {}
    acted[goal_id] = now
    shelf.write_json(box, "state", GOAL_ACTIVITY, {"v": 1, "goals": acted})


def _archive_goal(paths: Paths, goal_id: str, now: float) -> Outcome:
    src = paths.goal(goal_id)
    if not src.exists():
        return Outcome(False, f"no goal {goal_id!r} to archive")
    paths.goals_archive.mkdir(parents=True, exist_ok=True)
    dest = paths.goals_archive / f"{goal_id}.md"
    if dest.exists():  # never overwrite an older archive
        dest = (
            paths.goals_archive
            / f"{goal_id}.{time.strftime('%Y%m%d-%H%M%S', time.localtime(now))}.md"
        )
    os.replace(src, dest)
    return Outcome(True, f"→ {dest.relative_to(paths.root)}")


def _keep_playbook_history(paths: Paths, now: float) -> None:
    if not paths.playbook.exists():
        return
    hist = paths.playbook_history
    hist.mkdir(exist_ok=True)
    stem = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    dest, n = hist / f"{stem}.md", 1
    while dest.exists():
        dest, n = hist / f"{stem}-{n:04d}.md", n + 1
    jsonio.atomic_write(dest, paths.playbook.read_bytes())
    versions = sorted(p for p in hist.glob("*.md"))
    for old in versions[:-PLAYBOOK_KEEP]:
        with contextlib.suppress(FileNotFoundError):
            old.unlink()


# -- run_shell ------------------------------------------------------------------------------


def _run_shell(
    paths: Paths, cfg: Config, move: Move, now: float, argv: list[str], *, fencing: Fencing | None
) -> Outcome:
    """Run a command the gate admitted: allowlisted (argv, no shell) or approved (bash -c);
    on a shared backend with the fence it runs under in its environment (LOOOP_FENCE)."""
    assert isinstance(move.action, RunShell)
    cmd = move.action.cmd
    wal.begin(paths, move.to_json(), now)
    try:
        result = procs.run(
            argv,
            cwd=paths.root,
            env=child_env(paths, fencing.env() if fencing else None, config=cfg),
            timeout_s=cfg.gates.shell_timeout_s,
            cap=64 * 1024,
            stderr_tail=SHELL_TAIL,
        )
    finally:
        wal.end(paths)
    output = (result.stdout[-SHELL_TAIL:] + b"\n" + result.stderr_tail).decode("utf-8", "replace")
    record = {
        "v": 1,
        "cmd": cmd,
        "exit_code": result.exit_code,
        "output": output.strip(),
        "at": now,
    }
    jsonio.write_json(paths.state / "last-shell.json", record)
    excerpt = output.strip()[-OUTPUT_EXCERPT:]
    if result.exit_code != 0:
        why = "timed out" if result.timed_out else f"exit {result.exit_code}"
        return Outcome(
            False,
            f"command failed ({why})",
            detail={"exit_code": result.exit_code, "output": excerpt},
        )
    return Outcome(True, "exit 0", detail={"exit_code": 0, "output": excerpt})


def take_last_shell(paths: Paths) -> dict[str, Any] | None:
    """The last run_shell's output, handed to the next decide exactly once."""
    path = paths.state / "last-shell.json"
    try:
        record = jsonio.read_json(path, None)
    except LooopError:
        record = None
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return record if isinstance(record, dict) else None


# -- the mailbox, workers and rounds ----------------------------------------------------------


def _ask(wd: WorkDir, prompt: str, options: tuple[str, ...] | None, now: float) -> Outcome:
    from looop_py.asks import mailbox  # only for an ask: the forgery seal and identity

    ask = mailbox.open_ask(wd, prompt=prompt, asker="decider", now=now, options=options or ())
    return Outcome(True, f"as {ask.id}", detail={"ask": ask.id})


def _workers(
    wd: WorkDir, move: Move, now: float, verify: str | None = None, fencing: Fencing | None = None
) -> Outcome:
    """A worker starts with the fence it was started under (LOOOP_FENCE, no deadline: it
    outlives the beat), so its own writes can ask `looop fence check` first: held while the
    host that started it still holds the pulse (kept across beats on etcd)."""
    from looop_py.workers import kill, launch  # only for a worker move

    a = move.action
    if isinstance(a, StartWorker):
        started = launch.start(
            wd,
            a.id,
            a.prompt,
            runtime=a.runtime,
            verify=verify if verify is not None else a.verify,
            workspace=a.workspace,
            fence=fencing.claim_env() if fencing else None,
            now=now,
        )
        stamp_goal(wd, a.id, now)
        return Outcome(True, f"pid {started.pid}")
    assert isinstance(a, KillWorker)
    kill.kill(wd.paths, a.id, reason=a.reason)
    return Outcome(True)


def _start_round(wd: WorkDir, move: Move, now: float) -> Outcome:
    from looop_py.loops import advance  # only for a round move: the engine is heavy

    a = move.action
    assert isinstance(a, StartRound)
    try:
        state = advance.start_round(wd, a.loop, now=now, trigger="move", target=a.target)
    except advance.AlreadyLive as live:  # what the move asked for is under way: no failure
        return Outcome(True, f"{live.message}: nothing started")
    stamp_goal(wd, a.loop, now)
    return Outcome(True, f"round {state.id} ({state.phase.value})")
