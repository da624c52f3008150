"""The loop engine bound to a work dir: real workers, claims, mailbox, memory, workspaces.

The engine (looop_py/engine/) knows rounds, gates and budgets but not this
work dir; the adapters here give it looop's own pieces:

  SessionWorkers   maker and checker run as detached workers (sessions.py)
  RoundClaims      a round holds its target as a claim with no process behind it
  MailboxApprovals an escalation is an approval ask; `looop approve/deny` answer it
  RoundWorkspaces  L2/L3 rounds work in a git worktree of their own when there is a repo

`advance` is the pulse's ADVANCE step: live rounds move as far as they can
without waiting, and loops whose cadence fell due start a round. It calls no
model. Loop cadences are indexed by goal-file stat, so a quiet beat never
parses YAML.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import ClaimHeld, CorruptFile, LooopError, UsageError
from looop_py.loops.index import cadences, index, schedule_book
from looop_py.workdir import mailbox
from looop_py.workdir.config import Config
from looop_py.workdir.paths import Paths
from looop_py.workers import sessions

# typing is not imported at run time: the pulse loads this module when loops exist.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from looop_py.engine.loop import LoopEngine
    from looop_py.engine.ports import Answer, ApprovalRequest, WorkerRequest, WorkerResult
    from looop_py.engine.report import RoundReport
    from looop_py.engine.rounds import RoundState
    from looop_py.engine.spec import LoopSpec

OUTPUT_TAIL = 2000


def load_spec(paths: Paths, loop: str) -> LoopSpec:
    from looop_py.engine.spec import LoopSpec

    path = paths.goal(loop)
    if not path.exists():
        raise UsageError(f"no loop {loop!r}: goals/{loop}.md does not exist", "see `looop loops`")
    spec = LoopSpec.from_goal(path)
    return spec


# -- adapters -------------------------------------------------------------------------------


def script_prompt(prompt: str) -> str:
    """For a runtime that runs its prompt as bash: the engine's framing becomes comments."""
    from looop_py.engine.prompts import PRIOR_HEADING

    def comment(text: str) -> str:
        return "\n".join(f"# {line}".rstrip() for line in text.strip().splitlines())

    for marker, split in (("\nTask:\n", str.partition), ("\nWhat to check:\n", str.rpartition)):
        head, found, task = split(prompt, marker)
        if found:
            tail = ""
            if f"\n\n{PRIOR_HEADING}\n" in task:
                task, _, prior = task.rpartition(f"\n\n{PRIOR_HEADING}\n")
                tail = f"{PRIOR_HEADING}\n{prior}"
            return f"{comment(head + marker)}\n{task}\n{comment(tail)}\n"
    return comment(prompt) + "\n"


@dataclass
class SessionWorkers:
    """Makers and checkers as detached workers; a round polls them across beats."""

    paths: Paths
    config: Config
    clock: Callable[[], float] = time.time

    def start(self, request: WorkerRequest) -> str:
        from looop_py.workers import runtimes

        meta = sessions._read(sessions.session_dir(self.paths, request.id) / sessions.META)
        if meta.get("round") == request.round_id:
            return request.id  # started before this process died: never twice
        runtime = runtimes.resolve(self.config, request.runtime)
        prompt = script_prompt(request.prompt) if runtime.script else request.prompt
        sessions.start(
            self.paths,
            self.config,
            request.id,
            prompt,
            runtime=request.runtime,
            round=request.round_id,
            cwd=Path(request.workspace) if request.workspace else None,
            read_only=request.read_only,
            now=self.clock(),
        )
        return request.id

    def poll(self, handle: str) -> WorkerResult | None:
        from looop_py.engine.ports import WorkerResult, WorkerStatus

        try:
            view = sessions.get(self.paths, handle, self.clock())
        except (UsageError, ValueError):
            return WorkerResult(WorkerStatus.FAILED, f"worker session {handle} is gone")
        if view.alive:
            return None
        usage = view.usage or {}
        tokens_in = int(usage.get("input_tokens") or usage.get("total_tokens") or 0)
        tokens_out = int(usage.get("output_tokens") or 0)
        result = view.result or {}
        tail = _output_tail(self.paths, handle)
        if result.get("status"):
            text = str(result.get("summary") or tail or "")
            try:
                status = WorkerStatus.parse(str(result["status"]))
            except ValueError:
                status = WorkerStatus.FAILED
            return WorkerResult(status, text, tokens_in, tokens_out)
        # Exit code 0 alone never means success: without `looop done` it is not verified.
        if view.exit_code == 0:
            text = f"exited 0 without reporting (`looop done`); its output ends:\n{tail}"
            return WorkerResult(WorkerStatus.DONE_WITH_CONCERNS, text, tokens_in, tokens_out)
        text = f"{view.state} with exit code {view.exit_code}; its output ends:\n{tail}"
        return WorkerResult(WorkerStatus.FAILED, text, tokens_in, tokens_out)

    def cancel(self, handle: str) -> None:
        with contextlib.suppress(UsageError):
            sessions.kill(self.paths, handle, reason="the round ran out of wall-clock time")


def _output_tail(paths: Paths, handle: str) -> str:
    lines = jsonio.tail_lines(sessions.session_dir(paths, handle) / "output.log", 40)
    text = b"\n".join(lines).decode("utf-8", "replace")
    return text[-OUTPUT_TAIL:].strip()


@dataclass
class RoundClaims:
    """A round claims its target for as long as it lives (a claim with no process)."""

    paths: Paths
    clock: Callable[[], float] = time.time

    def acquire(self, name: str, owner: str) -> int | None:
        from looop_py.claims import lease as claims

        try:
            got = claims.claim(self.paths, name, claims.round_holder(owner), now=self.clock())
        except ClaimHeld:
            return None
        return got.claim.epoch

    def release(self, name: str, owner: str) -> None:
        from looop_py.claims import lease as claims

        with contextlib.suppress(ClaimHeld):
            claims.unclaim(self.paths, name, claims.round_holder(owner), now=self.clock())


@dataclass
class MailboxApprovals:
    """An escalated round becomes an approval ask; the same key twice is one ask."""

    paths: Paths
    clock: Callable[[], float] = time.time

    def open(self, request: ApprovalRequest) -> str:
        existing = _ask_with_key(self.paths, request.key)
        if existing is not None:
            return existing
        ask = mailbox.open_ask(
            self.paths,
            prompt=request.question,
            asker=f"loop-{request.loop}",
            now=self.clock(),
            kind="approval",
            hold={"round": request.round_id, "key": request.key, **request.to_dict()},
        )
        return ask.id

    def poll(self, ask_id: str) -> Answer:
        from looop_py.engine.ports import Answer, Approval

        got = mailbox.get_answer(self.paths, ask_id)
        if got is None:
            if not (self.paths.asks / f"{ask_id}.json").exists():
                return Answer(Approval.DENIED, "the approval ask was removed")
            return Answer.pending()
        state = Approval.APPROVED if got.verdict == "approved" else Approval.DENIED
        return Answer(state, got.note or (got.text if got.verdict is None else None))


def _ask_with_key(paths: Paths, key: str) -> str | None:
    for _, data in jsonio.json_files(paths.asks):
        if isinstance(data, dict) and (data.get("hold") or {}).get("key") == key:
            return str(data.get("id"))
    return None


@dataclass
class RoundWorkspaces:
    """L1 reads in place; L2/L3 work in a git worktree of their own when there is a repo."""

    paths: Paths
    config: Config

    def prepare(self, round_id: str, spec: LoopSpec) -> str:
        from looop_py.workers import workspaces

        wcfg = self.config.workers
        if not spec.level.maker_may_write:
            return str(self._repo() or self.paths.root)
        if self._repo() is None:
            return str(self.paths.root)
        return str(workspaces.create(self.paths, wcfg, f"round-{round_id}").path)

    def release(self, round_id: str, workspace: str, outcome: str) -> None:
        from looop_py.workers import workspaces

        wcfg = self.config.workers
        path = workspaces.root(self.paths, wcfg) / f"round-{round_id}"
        if Path(workspace) != path or not path.exists():
            return
        repo = self._repo()
        if repo is not None:
            wt = workspaces.Worktree(repo, path, workspaces.branch_for(f"round-{round_id}"))
            workspaces.dispose(wt)  # kept when it holds commits no other branch has

    def _repo(self) -> Path | None:
        from looop_py.workers import workspaces

        try:
            return workspaces.repo_for(self.paths, self.config.workers)
        except LooopError:
            return None


# -- the engine for one loop ------------------------------------------------------------------


def engine_for(
    paths: Paths, config: Config, spec: LoopSpec, clock: Callable[[], float] = time.time
) -> LoopEngine:
    from looop_py.engine.actions import CommandActionExecutor, action_commands
    from looop_py.engine.loop import LoopEngine
    from looop_py.engine.rounds import RoundStore
    from looop_py.loops.memory import JsonlMemory
    from looop_py.workdir.environ import child_env

    return LoopEngine(
        spec,
        SessionWorkers(paths, config, clock),
        executor=CommandActionExecutor(
            action_commands(config.actions), cwd=paths.root, env=child_env(paths)
        ),
        memory=JsonlMemory(paths.memory),
        claims=RoundClaims(paths, clock),
        escalations=MailboxApprovals(paths, clock),
        workspaces=RoundWorkspaces(paths, config),
        store=RoundStore(paths.rounds),
        clock=clock,
    )


def start_round(
    paths: Paths,
    config: Config,
    loop: str,
    *,
    now: float,
    trigger: str,
    target: str | None = None,
) -> RoundState:
    """Begin a round of `loop` and take its first steps (it never waits here)."""
    spec = load_spec(paths, loop)
    if target is not None:
        spec = spec.with_target(target)
    engine = engine_for(paths, config, spec, clock=lambda: now)
    live = engine.live_rounds()
    if live:
        raise UsageError(
            f"loop {loop} already has a live round ({live[0].id}, {live[0].phase.value})",
            "wait for it to finish; `looop rounds` shows where it is",
        )
    state = engine.start_round(trigger=trigger, now=now)
    return engine.settle(state, now)


def advance(paths: Paths, config: Config, now: float) -> list[dict[str, Any]]:
    """ADVANCE: step every live round; start the rounds whose cadence fell due."""
    events: list[dict[str, Any]] = []
    from looop_py.engine.rounds import RoundStore

    store = RoundStore(paths.rounds)
    for state in store.live():
        try:
            spec = state.spec
            engine = engine_for(paths, config, spec, clock=lambda: now)
            new = engine.settle(state, now)
        except Exception as exc:  # one broken round must not stop the beat
            events.append({"event": "round_error", "round": state.id, "message": repr(exc)})
            continue
        if new.phase != state.phase:
            events.append(_round_event(new))
    archive_done(paths, now)
    due_loops = cadences(index(paths))
    if due_loops:
        from looop_py.loops import schedule as signals

        for loop in signals.due_loops(schedule_book(paths), due_loops, now):
            if store.live(loop):
                continue  # stays due; fires once its live round ends
            # The slot is spent either way: a loop that cannot start is not retried every beat.
            signals.mark_fired(schedule_book(paths), loop, due_loops[loop], now)
            try:
                state = start_round(paths, config, loop, now=now, trigger="cadence")
            except LooopError as exc:
                events.append({"event": "round_not_started", "loop": loop, "message": str(exc)})
                continue
            events.append(
                {"event": "round_started", "loop": loop, "round": state.id, "by": "cadence"}
            )
            if state.phase.value != "recall":
                events.append(_round_event(state))
    return events


DONE_KEEP_S = 3600.0  # a finished round stays in rounds/ this long, then moves to rounds/done/


def archive_done(paths: Paths, now: float) -> list[str]:
    """Move rounds that ended a while ago to rounds/done/, so each beat reads only live ones.

    Returns the ids of the rounds it moved.
    """
    moved: list[str] = []
    done_dir = paths.rounds / "done"
    with contextlib.suppress(FileNotFoundError), os.scandir(paths.rounds) as it:
        entries = [e for e in it if e.name.endswith(".json") and e.is_file()]
    for entry in entries:
        try:
            data = jsonio.read_json(Path(entry.path))
        except CorruptFile:
            continue
        ended = data.get("ended_at") if isinstance(data, dict) else None
        if (
            data.get("phase") == "done"
            and isinstance(ended, int | float)
            and now - ended > DONE_KEEP_S
        ):
            done_dir.mkdir(exist_ok=True)
            os.replace(entry.path, done_dir / entry.name)
            moved.append(entry.name.removesuffix(".json"))
    return moved


def _round_event(state: RoundState) -> dict[str, Any]:
    event: dict[str, Any] = {"event": "round_step", "round": state.id, "phase": state.phase.value}
    if state.outcome is not None:
        event["outcome"] = state.outcome.value
    return event


def run(paths: Paths, config: Config, loop: str, *, wait_for_human: bool = False) -> RoundReport:
    """`looop run`: one round in the foreground, driven to its end (or to a human)."""
    spec = load_spec(paths, loop)
    return engine_for(paths, config, spec).run_once(wait_for_human=wait_for_human)
