"""Rounds: the reference's engine cases in Python form, then the guarantees we add."""

from __future__ import annotations

from pathlib import Path

import pytest

from looop_py import (
    ActionError,
    ActionReceipt,
    AllowlistGate,
    BudgetLimit,
    CallbackActionExecutor,
    CallbackGate,
    GateDecision,
    LoopEngine,
    LoopLevel,
    LoopSpec,
    ProposedAction,
    RoundOutcome,
    TokenBudget,
)
from looop_py.engine import prompts
from looop_py.engine.inproc import (
    InMemoryClaims,
    InMemoryEscalations,
    InProcessWorkers,
    ListMemory,
    ScriptedWorkers,
    SharedWorkspace,
    done,
)
from looop_py.engine.ports import Approval, MemoryEntry, WorkerRequest, WorkerResult, WorkerStatus
from looop_py.engine.rounds import Phase, RoundState, new_round
from looop_py.engine.steps import advance
from looop_py.loops.store import JsonlMemory, RoundFiles
from looop_py.workdir.paths import Paths
from looop_py.workdir.shelf import FilesShelf


class Clock:
    """A clock the test moves; `sleep` moves it too, so driving loops take no real time."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def spec(level: LoopLevel, **changes: object) -> LoopSpec:
    base = LoopSpec(
        "test-loop",
        "keep the test loop honest",
        level,
        maker_prompt="make a report",
        checker_prompt="verify the report",
        action_kind="commit",
    )
    return base if not changes else LoopSpec.from_dict({**base.to_dict(), **changes})


def engine(
    s: LoopSpec, workers: InProcessWorkers, clock: Clock | None = None, **kw: object
) -> LoopEngine:
    clock = clock or Clock()
    return LoopEngine(s, workers, clock=clock, sleep=clock.sleep, poll_s=1.0, **kw)  # type: ignore[arg-type]


class CountingExecutor:
    def __init__(self, receipt: ActionReceipt | None = None) -> None:
        self.calls: list[tuple[str, str, str | None]] = []
        self.receipt = receipt or ActionReceipt("commit", "created commit abc123")

    def execute(self, s: LoopSpec, action: ProposedAction, workspace: str | None) -> ActionReceipt:
        self.calls.append((s.name, action.kind, workspace))
        return self.receipt


# -- the reference's cases -----------------------------------------------------------


def test_l1_runs_maker_and_checker_read_only_and_never_acts() -> None:
    workers = ScriptedWorkers([done("maker report"), done("checker report")])
    gate_calls: list[ProposedAction] = []

    def permissive(level: LoopLevel, action: ProposedAction) -> GateDecision:
        gate_calls.append(action)
        return GateDecision.auto_proceed()

    executor = CountingExecutor()
    report = engine(
        spec(LoopLevel.L1_REPORT), workers, gate=CallbackGate(permissive), executor=executor
    ).run_once()
    assert report.outcome is RoundOutcome.REPORTED
    assert [r.kind for r in workers.requests] == ["maker", "checker"]
    assert all(r.read_only for r in workers.requests)
    assert "READ-ONLY" in workers.requests[0].prompt
    assert "READ-ONLY" in workers.requests[1].prompt
    assert len(gate_calls) == 1 and report.decision == GateDecision.auto_proceed()
    assert executor.calls == [] and report.action is None
    assert report.should_deliver()


def test_l2_maker_may_write_and_is_not_read_only() -> None:
    workers = ScriptedWorkers([done("m"), done("c")])
    engine(spec(LoopLevel.L2_ASSISTED), workers).run_once()
    maker, checker = workers.requests
    assert not maker.read_only and not checker.read_only
    assert prompts.MAY_WRITE in maker.prompt and "READ-ONLY" not in maker.prompt
    assert (maker.name, checker.name) == ("test-loop:maker", "test-loop:checker")
    assert maker.max_iters == 12


def test_l3_allowlisted_verified_round_proceeds_quietly() -> None:
    workers = ScriptedWorkers([done("maker produced patch", 10, 5), done("verified clean", 7, 3)])
    report = engine(
        spec(LoopLevel.L3_UNATTENDED), workers, gate=AllowlistGate(["commit"])
    ).run_once()
    assert report.outcome is RoundOutcome.PROCEEDED
    assert report.decision is not None and report.decision.is_auto
    assert report.action is not None and report.action.kind == "commit"
    assert "no external action executor configured" in report.action.summary
    assert not report.should_deliver()
    assert (report.input_tokens, report.output_tokens, report.total_tokens) == (17, 8, 25)


def test_auto_proceed_calls_a_custom_executor_once(tmp_path: Path) -> None:
    calls: list[str] = []

    def execute(s: LoopSpec, action: ProposedAction, workspace: str | None) -> ActionReceipt:
        calls.append(workspace or "")
        assert s.name == "test-loop" and action.kind == "commit"
        return ActionReceipt("commit", "created commit abc123")

    report = engine(
        spec(LoopLevel.L3_UNATTENDED),
        ScriptedWorkers([done("maker produced patch"), done("verified clean")]),
        gate=AllowlistGate(["commit"]),
        executor=CallbackActionExecutor(execute),
        workspaces=SharedWorkspace(tmp_path),
    ).run_once()
    assert calls == [str(tmp_path)]
    assert report.outcome is RoundOutcome.PROCEEDED
    assert report.action == ActionReceipt("commit", "created commit abc123")
    assert "action: commit — created commit abc123" in report.render()


def test_an_executor_failure_fails_the_round() -> None:
    def boom(s: LoopSpec, a: ProposedAction, w: str | None) -> ActionReceipt:
        raise ActionError("boom")

    report = engine(
        spec(LoopLevel.L3_UNATTENDED),
        ScriptedWorkers([done("patch"), done("clean")]),
        gate=AllowlistGate(["commit"]),
        executor=CallbackActionExecutor(boom),
    ).run_once()
    assert report.outcome is RoundOutcome.FAILED
    assert report.error is not None and "action executor failed" in report.error
    assert "boom" in report.error
    assert report.action is None and report.should_deliver()
    assert report.decision is None  # as in the crate: a failed round has no decision
    assert "failure: action executor failed: boom" in report.render()


def test_budget_exhaustion_after_the_maker_skips_the_checker() -> None:
    workers = ScriptedWorkers([done("maker spent too much", 4, 3), done("never")])
    s = spec(LoopLevel.L2_ASSISTED).with_budget(TokenBudget.iters(4).with_max_total_tokens(5))
    report = engine(s, workers).run_once()
    assert report.outcome is RoundOutcome.BUDGET_EXHAUSTED
    assert report.limit is BudgetLimit.TOTAL
    assert report.maker is not None and report.checker is None
    assert len(workers.requests) == 1 and workers.requests[0].max_iters == 4
    assert report.decision is None
    assert "budget: total-tokens: 7 spent, limit 5; checker skipped\n" in report.render()
    assert report.render().count("checker skipped") == 1


def test_budget_exhaustion_after_the_checker_skips_the_gate() -> None:
    gate_calls: list[ProposedAction] = []
    s = spec(LoopLevel.L3_UNATTENDED).with_budget(TokenBudget().with_max_output_tokens(10))
    report = engine(
        s,
        ScriptedWorkers([done("m", 1, 5), done("c", 1, 6)]),
        gate=CallbackGate(lambda lv, a: gate_calls.append(a) or GateDecision.auto_proceed()),
    ).run_once()
    assert report.outcome is RoundOutcome.BUDGET_EXHAUSTED
    assert report.limit is BudgetLimit.OUTPUT and gate_calls == []


def test_memory_is_recalled_and_the_round_recorded() -> None:
    memory = ListMemory(
        {"test-loop": [MemoryEntry("prior loop state", ("test-loop", "loop-state"))]}
    )
    workers = ScriptedWorkers([done("maker used prior state"), done("checker verified")])
    report = engine(spec(LoopLevel.L1_REPORT), workers, memory=memory).run_once()
    assert report.outcome is RoundOutcome.REPORTED
    assert "State from previous rounds:\n- prior loop state" in workers.requests[0].prompt
    entries = memory.entries["test-loop"]
    assert len(entries) == 2
    recorded = entries[-1]
    assert recorded.content.startswith("reported")
    assert recorded.source == "loop:test-loop"
    assert "loop-state" in recorded.tags
    assert recorded.round_id == report.round_id


def test_recall_keeps_the_last_five_entries() -> None:
    memory = ListMemory({"test-loop": [MemoryEntry(f"round {i}") for i in range(8)]})
    workers = ScriptedWorkers([done("m"), done("c")])
    engine(spec(LoopLevel.L1_REPORT), workers, memory=memory).run_once()
    prompt = workers.requests[0].prompt
    assert "- round 2" not in prompt and "- round 3\n" in prompt and prompt.endswith("- round 7")


# -- the floor no gate can lower -------------------------------------------------------


def test_l2_never_proceeds_alone_even_with_a_permissive_gate() -> None:
    executor = CountingExecutor()
    escalations = InMemoryEscalations()
    eng = engine(
        spec(LoopLevel.L2_ASSISTED),
        ScriptedWorkers([done("patch"), done("clean")]),
        gate=CallbackGate(lambda lv, a: GateDecision.auto_proceed()),
        executor=executor,
        escalations=escalations,
    )
    report = eng.run_once()
    assert report.outcome is RoundOutcome.ESCALATED
    assert report.reason is not None and "human approves every action" in report.reason
    assert executor.calls == []
    assert report.phase == "awaiting-approval" and report.ask_id in escalations.asks
    assert "escalation:" in report.render() and "waiting for a human" in report.render()

    escalations.approve(report.ask_id or "")
    final = eng.resume(report.round_id or "")
    assert final.outcome is RoundOutcome.PROCEEDED and final.answer == "approved"
    assert executor.calls == [("test-loop", "commit", ".")]
    assert not final.should_deliver()


@pytest.mark.parametrize("status", [WorkerStatus.DONE_WITH_CONCERNS, WorkerStatus.BLOCKED])
def test_unverified_work_never_proceeds_alone(status: WorkerStatus) -> None:
    for gate in (
        CallbackGate(lambda lv, a: GateDecision.auto_proceed()),
        AllowlistGate(["commit"]),
    ):
        executor = CountingExecutor()
        workers = ScriptedWorkers([done("patch"), WorkerResult(status, "looks risky")])
        report = engine(
            spec(LoopLevel.L3_UNATTENDED), workers, gate=gate, executor=executor
        ).run_once()
        assert report.outcome is RoundOutcome.ESCALATED
        assert report.proposed is not None and not report.proposed.verified
        assert "verif" in (report.reason or "")
        assert executor.calls == []


def test_a_denial_goes_into_memory_for_the_next_round(tmp_path: Path) -> None:
    memory = JsonlMemory(tmp_path / "memory")
    escalations = InMemoryEscalations()
    workers = ScriptedWorkers([done("patch A"), done("clean"), done("patch B"), done("ok")])
    executor = CountingExecutor()
    eng = engine(
        spec(LoopLevel.L2_ASSISTED),
        workers,
        memory=memory,
        escalations=escalations,
        executor=executor,
    )
    first = eng.run_once()
    assert first.outcome is RoundOutcome.ESCALATED
    assert memory.recall("test-loop", 5) == []  # nothing recorded while the human decides
    escalations.deny(first.ask_id or "", "touches the release branch")
    final = eng.resume(first.round_id or "")
    assert final.outcome is RoundOutcome.ESCALATED and final.answer == "denied"
    assert "approval: denied by a human: touches the release branch" in final.render()
    assert executor.calls == []
    (entry,) = memory.recall("test-loop", 5)
    assert entry.content.startswith("escalated — a human denied `commit`")
    assert "touches the release branch" in entry.content

    eng.run_once()
    assert "touches the release branch" in workers.requests[2].prompt


def test_auto_approved_escalations_run_to_the_end_in_one_call() -> None:
    executor = CountingExecutor()
    report = engine(
        spec(LoopLevel.L2_ASSISTED),
        ScriptedWorkers([done("patch"), done("clean")]),
        escalations=InMemoryEscalations(auto=Approval.APPROVED),
        executor=executor,
    ).run_once()
    assert report.outcome is RoundOutcome.PROCEEDED and len(executor.calls) == 1


# -- failures ---------------------------------------------------------------------------


def test_a_failed_maker_fails_the_round_and_skips_the_checker() -> None:
    workers = ScriptedWorkers([WorkerResult(WorkerStatus.FAILED, "runtime crashed", 3, 0)])
    claims = InMemoryClaims()
    report = engine(spec(LoopLevel.L2_ASSISTED), workers, claims=claims).run_once()
    assert report.outcome is RoundOutcome.FAILED
    assert report.error == "maker failed: runtime crashed"
    assert len(workers.requests) == 1 and report.input_tokens == 3
    assert claims.held == {}


def test_a_raising_gate_fails_the_round_and_still_releases() -> None:
    def broken(level: LoopLevel, action: ProposedAction) -> GateDecision:
        raise RuntimeError("policy service down")

    claims = InMemoryClaims()
    workspaces = SharedWorkspace()
    report = engine(
        spec(LoopLevel.L2_ASSISTED),
        ScriptedWorkers([done("m"), done("c")]),
        gate=CallbackGate(broken),
        claims=claims,
        workspaces=workspaces,
    ).run_once()
    assert report.outcome is RoundOutcome.FAILED
    assert report.error == "gate failed: policy service down"
    assert claims.held == {} and workspaces.released[0][1] == "failed"


def test_run_once_never_raises_even_when_the_store_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "rounds"
    blocker.write_text("a file where the rounds dir should be")
    report = engine(
        spec(LoopLevel.L1_REPORT),
        ScriptedWorkers([done("m"), done("c")]),
        store=RoundFiles(FilesShelf(Paths(tmp_path))),
    ).run_once()
    assert report.outcome is RoundOutcome.FAILED and report.error


# -- the machine itself ----------------------------------------------------------------


def deps_for(eng: LoopEngine) -> object:
    return eng.deps


def test_advance_is_one_step_and_returns_the_same_state_while_waiting() -> None:
    workers = ScriptedWorkers([done("m"), done("c")], polls=2)
    clock = Clock()
    eng = engine(spec(LoopLevel.L1_REPORT), workers, clock)
    state = new_round(eng.spec, clock())
    phases = []
    for _ in range(40):
        new = advance(state, eng.deps, clock())
        if new is state:
            phases.append(f"wait:{state.phase.value}")
        else:
            phases.append(new.phase.value)
        state = new
        if state.phase is Phase.DONE:
            break
    assert phases == [
        "claim",
        "workspace",
        "maker",
        "maker-running",
        "wait:maker-running",
        "wait:maker-running",
        "checker",
        "checker-running",
        "wait:checker-running",
        "wait:checker-running",
        "gate",
        "record",
        "release",
        "done",
    ]
    assert state.steps == 10 and state.ended_at == clock()


def test_round_state_round_trips_through_json(tmp_path: Path) -> None:
    store = RoundFiles(FilesShelf(Paths(tmp_path)))
    eng = engine(
        spec(LoopLevel.L3_UNATTENDED, allow=["commit"], target="repo"),
        ScriptedWorkers([done("m", 1, 2), WorkerResult(WorkerStatus.DONE, "c", 3, 4, iters=2)]),
        store=store,
    )
    report = eng.run_once()
    state = store.load(report.round_id or "")
    assert RoundState.from_dict(state.to_dict()) == state
    assert state.phase is Phase.DONE and state.outcome is RoundOutcome.PROCEEDED
    assert state.claim_epoch is not None and state.to_dict()["claim"]["name"] == "repo"
    assert report.to_dict()["checker"]["iters"] == 2
    assert "checker: Done in 2 iters\n" in report.render()


def test_two_rounds_on_one_target_never_run_at_once() -> None:
    claims = InMemoryClaims()
    clock = Clock()
    log: list[str] = []

    def worker(name: str) -> InProcessWorkers:
        def run(req: WorkerRequest) -> WorkerResult:
            log.append(f"{name}:{req.kind}")
            return done(f"{name} {req.kind}")

        return InProcessWorkers(run, polls=1)

    a = engine(LoopSpec("loop-a", "a", LoopLevel.L1_REPORT, target="repo"), worker("a"), clock)
    b = engine(LoopSpec("loop-b", "b", LoopLevel.L1_REPORT, target="repo"), worker("b"), clock)
    a.claims = b.claims = claims
    ra = a.settle(a.start_round())
    rb = b.settle(b.start_round())
    assert ra.phase is Phase.MAKER_RUNNING and rb.phase is Phase.CLAIM
    assert rb.waiting_since == clock()
    for _ in range(3):
        ra, rb = a.settle(ra), b.settle(rb)
    assert ra.phase is Phase.DONE
    rb = b.drive(rb)
    assert rb.phase is Phase.DONE and rb.outcome is RoundOutcome.REPORTED
    assert log == ["a:maker", "a:checker", "b:maker", "b:checker"]
    assert claims.held == {}


def test_a_round_over_its_wall_clock_is_stopped_as_budget_exhausted() -> None:
    clock = Clock()
    workers = InProcessWorkers(lambda req: done("too late"), polls=10_000)  # never finishes
    claims = InMemoryClaims()
    s = spec(LoopLevel.L2_ASSISTED).with_budget(TokenBudget().with_max_wall_s(30))
    report = engine(s, workers, clock, claims=claims).run_once()
    assert report.outcome is RoundOutcome.BUDGET_EXHAUSTED
    assert report.limit is BudgetLimit.WALL
    assert workers.cancelled == [f"{report.round_id}.maker"]
    assert report.checker is None and claims.held == {}
    assert "budget: wall-clock: 31 s spent, limit 30 s; stopped during maker" in report.render()


def test_a_human_taking_long_does_not_count_against_wall_time() -> None:
    clock = Clock()
    escalations = InMemoryEscalations()
    s = spec(LoopLevel.L2_ASSISTED).with_budget(TokenBudget().with_max_wall_s(30))
    eng = engine(s, ScriptedWorkers([done("m"), done("c")]), clock, escalations=escalations)
    first = eng.run_once()
    clock.t += 3600
    escalations.approve(first.ask_id or "")
    assert eng.resume(first.round_id or "").outcome is RoundOutcome.PROCEEDED


def test_a_persisted_round_resumes_after_a_restart(tmp_path: Path) -> None:
    # The "outside world" (running workers, held claims) survives the restart;
    # everything of the engine's own is rebuilt from the files.
    workers = ScriptedWorkers([done("m", 2, 2), done("c", 3, 3)], polls=3)
    claims = InMemoryClaims()
    clock = Clock()

    def fresh_engine() -> LoopEngine:
        return engine(
            spec(LoopLevel.L1_REPORT),
            workers,
            clock,
            claims=claims,
            store=RoundFiles(FilesShelf(Paths(tmp_path))),
            memory=JsonlMemory(tmp_path / "memory"),
        )

    first = fresh_engine()
    state = first.settle(first.start_round())
    assert state.phase is Phase.MAKER_RUNNING
    del first

    second = fresh_engine()
    (live,) = second.live_rounds()
    assert live.id == state.id and live.phase is Phase.MAKER_RUNNING
    report = second.resume(live.id)
    assert report.outcome is RoundOutcome.REPORTED
    assert [r.kind for r in workers.requests] == ["maker", "checker"]  # no second maker
    assert (report.input_tokens, report.output_tokens) == (5, 5)
    assert second.live_rounds() == []
    assert len(JsonlMemory(tmp_path / "memory").recall("test-loop", 10)) == 1


def test_a_crash_while_acting_is_reported_never_repeated(tmp_path: Path) -> None:
    class Crash(BaseException):
        pass

    calls: list[int] = []

    def crashing(s: LoopSpec, a: ProposedAction, w: str | None) -> ActionReceipt:
        calls.append(1)
        raise Crash  # the process dies mid-action

    def build(executor: object) -> LoopEngine:
        return engine(
            spec(LoopLevel.L3_UNATTENDED),
            ScriptedWorkers([done("m"), done("c")]),
            gate=AllowlistGate(["commit"]),
            executor=executor,
            store=RoundFiles(FilesShelf(Paths(tmp_path))),
        )

    with pytest.raises(Crash):
        build(CallbackActionExecutor(crashing)).run_once()
    (live,) = RoundFiles(FilesShelf(Paths(tmp_path))).live()
    assert live.phase is Phase.ACTING

    again = CountingExecutor()
    report = build(again).resume(live.id)
    assert report.outcome is RoundOutcome.FAILED
    assert report.error is not None and "not repeated" in report.error
    assert again.calls == [] and calls == [1]


def test_memory_is_recorded_once_even_if_the_record_step_runs_twice(tmp_path: Path) -> None:
    memory = JsonlMemory(tmp_path / "memory")
    entry = MemoryEntry("reported — x", round_id="r1")
    memory.record("loop", entry)
    memory.record("loop", entry)
    assert len(memory.recall("loop", 10)) == 1
    (tmp_path / "memory" / "loop.jsonl").open("a").write('{"torn": \n')
    assert [e.content for e in memory.recall("loop", 10)] == ["reported — x"]


def test_the_public_api_is_importable_from_the_package_without_heavy_imports() -> None:
    import subprocess
    import sys

    names = [
        "LoopLevel", "TokenBudget", "BudgetLimit", "BudgetState", "LoopSpec", "ProposedAction",
        "GateDecision", "HumanGate", "AlwaysEscalate", "AllowlistGate", "CallbackGate",
        "default_gate_for", "ActionReceipt", "ActionError", "ActionExecutor",
        "ApprovalOnlyExecutor", "CallbackActionExecutor", "CommandActionExecutor",
        "RoundOutcome", "RoundReport", "LoopEngine", "LoopScheduler", "Schedule", "patterns",
    ]  # fmt: skip
    code = (
        "import sys, looop_py\n"
        "assert not any(m.startswith('looop_py.engine') for m in sys.modules), 'eager'\n"
        "import looop_py.engine.rounds, looop_py.engine.loop, looop_py.engine.scheduler\n"
        "heavy = [m for m in ('typing', 'yaml', 'click') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        f"for n in {names!r}: getattr(looop_py, n)\n"
        "assert len(looop_py.patterns.catalogue()) == 7\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_run_once_leaves_a_round_waiting_for_a_busy_target_and_resume_finishes_it() -> None:
    claims = InMemoryClaims()
    assert claims.acquire("repo", "someone-else") is not None
    eng = engine(
        spec(LoopLevel.L1_REPORT, target="repo"),
        ScriptedWorkers([done("m"), done("c")]),
        claims=claims,
    )
    waiting = eng.run_once()
    assert waiting.outcome is None and waiting.phase == "claim" and not waiting.finished
    assert "waiting: claim `repo` is held" in waiting.render()
    assert "(in progress: claim)" in waiting.render()
    claims.release("repo", "someone-else")
    assert eng.resume(waiting.round_id or "").outcome is RoundOutcome.REPORTED


def test_a_worker_lost_by_its_runner_fails_the_round_instead_of_hanging() -> None:
    workers = ScriptedWorkers([done("m"), done("c")])
    clock = Clock()
    eng = engine(spec(LoopLevel.L1_REPORT), workers, clock)
    state = eng.settle(eng.start_round())
    assert state.phase is Phase.DONE  # sanity: in-process workers finish at once
    lost = new_round(eng.spec, clock(), round_id="lost")
    lost = RoundState.from_dict(
        {**lost.to_dict(), "phase": "maker-running", "maker_handle": "gone"}
    )
    report = eng.drive(lost).report()
    assert report.outcome is RoundOutcome.FAILED
    assert report.error is not None and "no worker 'gone'" in report.error
