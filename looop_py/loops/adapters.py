"""The engine's ports, implemented with looop's own pieces.

The engine (looop_py/engine/) knows rounds, gates and budgets but not this
work dir; these adapters give it the real thing:

  SessionWorkers   maker and checker run as detached workers (looop_py/workers/)
  RoundClaims      a round holds its target as a claim with no process behind it
  MailboxApprovals an escalation is an approval ask; `looop approve/deny` answer it
  RoundWorkspaces  L2/L3 rounds work in a git worktree of their own when there is a repo

The store (rounds/, memory/), the schedule book and the action executor are
in store.py, schedule.py and executor.py beside this one.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.coord import holders
from looop_py.coord.choose import coordinator
from looop_py.engine.ports import Answer, Approval, BudgetSpent, WorkerResult, WorkerStatus
from looop_py.engine.prompts import PRIOR_HEADING
from looop_py.errors import ClaimHeld, LooopError, UsageError
from looop_py.spend import ledger
from looop_py.workdir import shelf
from looop_py.workdir.paths import Paths
from looop_py.workers import kill, launch, reap, records, runtimes, workspaces

if TYPE_CHECKING:
    from looop_py.engine.ports import ApprovalRequest, WorkerRequest
    from looop_py.engine.spec import LoopSpec
    from looop_py.workdir.context import WorkDir

OUTPUT_TAIL = 2000


# -- adapters -------------------------------------------------------------------------------


def script_prompt(prompt: str) -> str:
    """For a runtime that runs its prompt as bash: the engine's framing becomes comments."""

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


# How long a round's worker's claim outlives the worker (while its host lives): the time its
# host has to read the result (only it can: the session is on its disk) before another host
# may step the round on. Cron beats every minute; a host silent this long is gone.
HANDOVER_S = 180.0


def worker_claim(session: str) -> str:
    """The claim a round's worker holds on a shared backend while it lives, and HANDOVER_S
    after, so its host reads the result before any other host steps the round on."""
    return f"worker.{session}"


@dataclass
class SessionWorkers:
    """Makers and checkers as detached workers; a round polls them across beats."""

    wd: WorkDir
    clock: Callable[[], float] = time.time

    def start(self, request: WorkerRequest) -> str:

        meta = records.read_meta(self.wd.paths, request.id)
        if meta.get("round") == request.round_id:
            return request.id  # started before this process died: never twice
        held = ledger.held(self.wd, self.clock())  # before every worker: over by one at most
        if held is not None:
            raise BudgetSpent(held)
        runtime = runtimes.resolve(self.wd.config, request.runtime)
        prompt = script_prompt(request.prompt) if runtime.script else request.prompt
        session = launch.start(
            self.wd,
            request.id,
            prompt,
            runtime=request.runtime,
            round=request.round_id,
            loop=request.loop,
            cwd=Path(request.workspace) if request.workspace else None,
            read_only=request.read_only,
            max_iters=request.max_iters,
            now=self.clock(),
        )
        if self.wd.shelf.shared:  # other hosts see it alive (loops/advance.py)
            # Labelled as its round's, so sys-claims leaves it to the engine, as a round's own.
            label = holders.ROUND_PREFIX + request.round_id
            holder = holders.Holder(label, session.pid, session.create_time)
            coordinator(self.wd).claim(
                worker_claim(session.id), holder, now=self.clock(), linger_s=HANDOVER_S
            )
        return request.id

    def poll(self, handle: str) -> WorkerResult | None:

        try:
            view = records.get(self.wd, handle, self.clock())
        except (UsageError, ValueError):
            return WorkerResult(WorkerStatus.FAILED, f"worker session {handle} is gone")
        if view.alive:
            return None
        if view.state in records.LIVE_STATES and view.exit_code is None and not view.lost:
            # The worker is gone but its supervisor lives and has not recorded the
            # exit code yet: it is finished only once that is written (or the
            # supervisor is gone too, which records.view reports as lost).
            return None
        # Its tokens go to the daily ledger now (a foreground `looop run` has no pulse to
        # housekeep it); the pulse's finalize charging the same worker again changes nothing.
        reap.charge(self.wd, records.session_dir(self.wd.paths, handle), self.clock(), view.usage)
        usage = view.usage or {}
        tokens_in = _count(usage.get("input_tokens"))
        tokens_out = _count(usage.get("output_tokens"))
        # a total with no split (`looop done --tokens N`) charges no direction
        unsplit = max(0, _count(usage.get("total_tokens")) - tokens_in - tokens_out)
        counts: dict[str, int] = {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "unsplit_tokens": unsplit,
        }
        result = view.result or {}
        iters = result.get("iters")  # tool calls, where the supervisor counted them
        if isinstance(iters, int) and not isinstance(iters, bool) and iters >= 0:
            counts["iters"] = iters
        tail = _output_tail(self.wd.paths, handle)
        if result.get("status"):
            text = str(result.get("summary") or tail or "")
            try:
                status = WorkerStatus.parse(str(result["status"]))
            except ValueError:
                status = WorkerStatus.FAILED
            return WorkerResult(status, text, **counts)
        # Exit code 0 alone never means success: without `looop done` it is not verified.
        if view.exit_code == 0:
            text = f"exited 0 without reporting (`looop done`); its output ends:\n{tail}"
            return WorkerResult(WorkerStatus.DONE_WITH_CONCERNS, text, **counts)
        text = f"{view.state} with exit code {view.exit_code}; its output ends:\n{tail}"
        return WorkerResult(WorkerStatus.FAILED, text, **counts)

    def cancel(self, handle: str) -> None:
        with contextlib.suppress(UsageError):
            kill.kill(self.wd.paths, handle, reason="the round ran out of wall-clock time")


def _count(value: object) -> int:
    number = jsonio.number(value)
    return max(0, int(number)) if number is not None else 0


def _output_tail(paths: Paths, handle: str) -> str:
    lines = jsonio.tail_lines(records.session_dir(paths, handle) / "output.log", 40)
    text = b"\n".join(lines).decode("utf-8", "replace")
    return text[-OUTPUT_TAIL:].strip()


@dataclass
class RoundClaims:
    """A round claims its target for as long as it lives (a claim with no process)."""

    wd: WorkDir
    clock: Callable[[], float] = time.time

    def acquire(self, name: str, owner: str) -> int | None:
        coord = coordinator(self.wd)  # files, or etcd: the claim is where every claim is
        try:
            got = coord.claim(name, holders.round_holder(owner), now=self.clock())
        except ClaimHeld:
            return None
        return got.claim.epoch

    def release(self, name: str, owner: str) -> None:

        with contextlib.suppress(ClaimHeld):
            coordinator(self.wd).unclaim(name, holders.round_holder(owner), now=self.clock())


@dataclass
class MailboxApprovals:
    """An escalated round becomes an approval ask; the same key twice is one ask."""

    wd: WorkDir
    clock: Callable[[], float] = time.time

    def open(self, request: ApprovalRequest) -> str:
        existing = _ask_with_key(self.wd, request.key)
        if existing is not None:
            return existing
        ask = mailbox.open_ask(
            self.wd,
            prompt=request.question,
            asker=f"loop-{request.loop}",
            now=self.clock(),
            kind=mailbox.AskKind.APPROVAL,
            hold={"round": request.round_id, "key": request.key, **request.to_dict()},
        )
        return ask.id

    def poll(self, ask_id: str) -> Answer:
        """Only an answer looop sealed to this ask moves the round on; a forged one is
        refused (asks/forged.py) and the round keeps waiting."""
        got = mailbox.checked_answer(self.wd, ask_id, now=self.clock())
        if got is None:
            if self.wd.shelf.get("asks", ask_id) is None:
                return Answer(Approval.DENIED, "the approval ask was removed")
            return Answer.pending()
        state = Approval.APPROVED if got.verdict == "approved" else Approval.DENIED
        return Answer(state, got.note or (got.text if got.verdict is None else None))


def _ask_with_key(wd: WorkDir, key: str) -> str | None:
    for _, data in shelf.json_items(wd.shelf, "asks"):
        if isinstance(data, dict) and (data.get("hold") or {}).get("key") == key:
            return str(data.get("id"))
    return None


@dataclass
class RoundWorkspaces:
    """L1 reads in place; L2/L3 work in a git worktree of their own when there is a repo."""

    wd: WorkDir

    def prepare(self, round_id: str, spec: LoopSpec) -> str:

        wcfg = self.wd.config.workers
        if not spec.level.maker_may_write:
            return str(self._repo() or self.wd.paths.root)
        if self._repo() is None:
            return str(self.wd.paths.root)
        return str(workspaces.create(self.wd.paths, wcfg, f"round-{round_id}").path)

    def release(self, round_id: str, workspace: str, outcome: str) -> None:

        wcfg = self.wd.config.workers
        path = workspaces.root(self.wd.paths, wcfg) / f"round-{round_id}"
        if Path(workspace) != path or not path.exists():
            return
        repo = self._repo()
        if repo is not None:
            wt = workspaces.Worktree(repo, path, workspaces.branch_for(f"round-{round_id}"))
            workspaces.dispose(wt)  # kept when it holds commits no other branch has

    def _repo(self) -> Path | None:

        try:
            return workspaces.repo_for(self.wd.paths, self.wd.config.workers)
        except LooopError:
            return None
