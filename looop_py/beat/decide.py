"""Steps 4 and 5 of a beat: DECIDE (ask the backend for one move) and ACT (carry it out).

Everything a model could get wrong is checked here, outside the model: the
spend limits before the call, the move's shape after it, the gates while it
runs. Any failure is journaled with its reason, arms the backoff and reaches
the next prompt as LAST FAILURE; the world hash is then not committed, so the
next allowed beat tries again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looop_py import world
from looop_py.beat.result import BeatOutcome
from looop_py.deciders.base import (
    DecideError,
    Decider,
    DecideRequest,
    InvalidReply,
    Usage,
    reads_prompt,
    request_in,
)
from looop_py.moves import act, union
from looop_py.records import record
from looop_py.sensing.sense import World
from looop_py.spend import ledger, limits
from looop_py.workdir import environ, journal, runs
from looop_py.workdir.context import WorkDir
from looop_py.world import Change


# @record: nothing compares these (identity) or assigns to them (mypy); each generated
# method is a full beat's fixed cost at import (records.py).
@record
class Verdict:
    """How the decide step ended: its outcome, the move and its stats."""

    outcome: BeatOutcome  # DECIDED, FAILED or HELD
    move: dict[str, Any] | None = None
    journal: str | None = None
    reason: str | None = None
    next_wake: float | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def policy_hash(items: dict[str, str]) -> str:
    """The part of the world a human edits; a change to it cuts a backoff short (a sensed
    World carries it: `World.policy`, from world.hashes)."""
    return world.hashes(items)[1]


def gather_prompt(
    wd: WorkDir,
    *,
    now: float,
    seen: World,
    changed: tuple[Change, ...],
    forced_by: str | None,
    flapping: list[str],
    last_failure: str | None,
) -> str:
    """The decide prompt, with PLAYBOOK and goals exactly as this beat hashed them."""
    from looop_py.deciders import prompt, volatility  # only for a backend that reads it

    paths = wd.paths
    snapshots = seen.snapshots
    playbook = None if seen.playbook is None else seen.playbook.decode("utf-8", "replace")
    goals = [(g.id, g.text) for g in seen.goals]  # read (if not held) only if shown
    probed = seen.probed
    asks = [
        {
            "id": v.ask.id,
            "kind": v.ask.kind,
            "asker": v.ask.asker,
            "age_s": max(0.0, now - v.ask.created_at),
            "prompt": v.ask.prompt,
            "live": v.state == "pending",
            "state": v.state.value,
            "why": v.why,
        }
        for v in probed.asks
    ]
    goal_ages: dict[str, float | None] = {
        g: None if last is None else max(0, round(now - last))
        for g, last in probed.last_acted.items()
    }
    shown = sorted(_with_goal_ages(snapshots, goal_ages).items())
    inp = prompt.PromptInput(
        now=now,
        playbook=playbook,
        goals=goals,
        snapshots=shown,
        asks=asks,
        goal_ages=goal_ages,
        journal=journal.tail(paths, 20),
        changed=[c.to_json() for c in changed],
        forced_by=forced_by,
        flapping=flapping,
        last_shell=act.take_last_shell(paths),
        last_failure=last_failure,
        since=volatility.since(paths, shown, now),
    )
    return prompt.build(inp, wd.config.limits.prompt_max_bytes or 1 << 40)


def _with_goal_ages(snapshots: dict[str, Any], ages: dict[str, float | None]) -> dict[str, Any]:
    """sys-goals as the prompt shows it: each goal's age beside when it was last acted on
    (computed now; the snapshot keeps only the time, so it is not rewritten every beat)."""
    snap: Any = snapshots.get("sys-goals")
    goals = snap.get("detail", {}).get("goals") if isinstance(snap, dict) else None
    if not isinstance(goals, dict):
        return snapshots
    shared: dict[int, dict[str, Any]] = {}  # rows seen twice (never acted on) shown once

    def aged(g: str, row: Any) -> Any:
        if not isinstance(row, dict):
            return row
        age = ages.get(g)
        if age is not None:
            return {**row, "age_s": age}
        if id(row) not in shared:
            shared[id(row)] = {**row, "age_s": None}
        return shared[id(row)]

    shown = {g: aged(g, row) for g, row in goals.items()}
    return {**snapshots, "sys-goals": {**snap, "detail": {**snap["detail"], "goals": shown}}}


def decide_and_act(
    wd: WorkDir,
    *,
    seen: World,
    changed: tuple[Change, ...],
    now: float,
    backend: Decider,
    forced_by: str | None = None,
    interrupted: str | None = None,
) -> Verdict:
    """DECIDE and ACT: check the limits, ask the backend, charge what it spent (whatever it
    answered), read one move from the answer, carry the move out."""
    ledgers = limits.load(wd)
    policy = seen.policy  # SENSE hashed it with the world
    block = limits.decide_block(ledgers, now=now, policy=policy, limits=wd.config.limits)
    if block is not None:
        return Verdict(BeatOutcome.HELD, reason=block)
    text = _prompt(
        wd,
        ledgers,
        seen=seen,
        changed=changed,
        now=now,
        forced_by=forced_by,
        interrupted=interrupted,
        build=reads_prompt(backend),
    )
    attempt = _Attempt.begin(wd, ledgers, policy=policy, backend=backend, text=text, now=now)
    request = _request(wd, seen=seen, changed=changed, now=now, forced_by=forced_by, text=text)
    try:
        decision = backend.decide(request)
    except DecideError as exc:
        attempt.finished(exc.usage, billed=isinstance(exc, InvalidReply))
        if exc.raw:  # what the backend did say (a CLI's error envelope) goes to runs/ too
            runs.write(wd, attempt.run, "output.txt", exc.raw)
        return attempt.fail(f"decider {backend.name} failed: {exc.message}")
    attempt.finished(decision.usage, billed=True)
    runs.write(wd, attempt.run, "output.txt", decision.raw)
    try:
        move = union.parse(decision.move)
    except union.MoveError as exc:
        return attempt.fail(f"rejected decision: {exc.message}")
    runs.write(wd, attempt.run, "move.json", move.to_json())
    return attempt.act(move)


def _prompt(
    wd: WorkDir,
    ledgers: limits.Ledgers,
    *,
    seen: World,
    changed: tuple[Change, ...],
    now: float,
    forced_by: str | None,
    interrupted: str | None,
    build: bool,
) -> str:
    """The prompt, with the flapping sensors and the last failure (and an interrupted beat's).
    Not built ("") for a backend that reads none: no goal is read for it, the last shell
    output waits for a decide that shows it, and the readings' `since` is not advanced."""
    held = limits.load_flap(wd)
    # The world's snap: items are one per snapshot (world.py: sorted by stem): taken by
    # name, not by a pass over every item (10,000 goals).
    snap_keys = sorted(f"snap:{stem}" for stem in seen.snapshots)
    snaps = {k: v for k in snap_keys if (v := seen.items.get(k)) is not None}
    flap_state, _ = limits.flap_update(held, snaps)
    if {"v": 1, **flap_state} != held:  # a beat where no signal moved leaves it as it was
        limits.save_flap(wd, flap_state)
    if not build:
        return ""
    last_failure = ledgers.backoff.reason if ledgers.backoff.fails else None
    if interrupted:
        last_failure = f"{interrupted}\n{last_failure}" if last_failure else interrupted
    return gather_prompt(
        wd,
        now=now,
        seen=seen,
        changed=changed,
        forced_by=forced_by,
        flapping=limits.flapping(flap_state, wd.config.limits.flap_streak),
        last_failure=last_failure,
    )


def _request(
    wd: WorkDir,
    *,
    seen: World,
    changed: tuple[Change, ...],
    now: float,
    forced_by: str | None,
    text: str,
) -> DecideRequest:
    return request_in(
        wd.paths,
        now,
        items=seen.items,
        changed=changed,
        snapshots=seen.snapshots,
        goals=seen.goals,
        live_workers=seen.probed.live_workers,
        last_acted=seen.probed.last_acted,
        forced=forced_by is not None,
        prompt=text,
    )


@dataclass(eq=False)  # one attempt, never compared
class _Attempt:
    """One decide under way: its run in runs/, its stats, and how it ends."""

    wd: WorkDir
    ledgers: limits.Ledgers
    policy: str
    now: float
    run: Path
    started: float
    stats: dict[str, Any]

    @classmethod
    def begin(
        cls,
        wd: WorkDir,
        ledgers: limits.Ledgers,
        *,
        policy: str,
        backend: Decider,
        text: str,
        now: float,
    ) -> _Attempt:
        """A new run holding the prompt (none for a backend that reads none: prompt_bytes 0);
        the attempt counts against the decide cap, win or lose."""
        run = runs.new_run(wd.paths)
        if text:
            runs.write(wd, run, "prompt.md", text)
        limits.save_decide(wd, ledgers, now)
        stats = {"backend": backend.name, "run": run.name, "prompt_bytes": len(text)}
        return cls(wd, ledgers, policy, now, run, time.monotonic(), stats)

    def finished(self, usage: Usage | None, *, billed: bool) -> None:
        """The backend is done: time it, and charge what it spent to the ledger before
        anything else looks at its answer. `billed`: it answered (a provider bills a reply
        it cannot use too), so no reported usage counts as unmetered under a budget."""
        self.stats["ms"] = round((time.monotonic() - self.started) * 1000, 1)
        if usage is not None:
            self.stats.update(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost_usd=usage.cost_usd,
            )
            if usage.cache_read_tokens or usage.cache_write_tokens:
                self.stats.update(
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                )
        lim = self.wd.config.limits
        budgeted = lim.daily_tokens > 0 or lim.daily_usd > 0
        if usage is None and not (billed and budgeted):
            return
        from looop_py.spend import prices  # only to charge a decide: rules and noop report none

        key = f"decide:{self.run.name}"
        runtime = prices.decider_runtime(self.wd.config.decider)
        charged = ledger.Charge(key, ledger.DECIDER, runtime=runtime)  # unmetered
        if usage is not None:
            charged = ledger.Charge(
                key,
                ledger.DECIDER,
                usage.total_tokens,
                usage.cost_usd,
                usage.input_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                runtime,
            )
        ledger.record_charge(self.wd, self.now, charged, budgeted_usd=lim.daily_usd > 0)

    def fail(self, reason: str) -> Verdict:
        """Journal why, arm the backoff; the next prompt shows it as LAST FAILURE."""
        wd = self.wd
        reason = environ.redact(reason, wd.config)  # a provider's error may echo the key
        journal.write(wd, f"✗ {reason}", wd.clock())  # first: a lost fence stops what follows
        fails = self.ledgers.backoff.fails + 1
        limits.save_backoff(wd, limits.Backoff(fails, wd.clock(), self.policy, reason))
        runs.write(wd, self.run, "error.txt", reason)
        runs.prune(wd.paths, wd.config.limits.runs_keep)
        return Verdict(BeatOutcome.FAILED, reason=reason, stats=self.stats)

    def act(self, move: union.Move) -> Verdict:
        """Carry the move out; a move that worked clears the backoff and is journaled."""
        wd = self.wd
        outcome = act.execute(wd, move, self.now)
        # What ran and how it went, in the beat's event (the page's beats view reads it back).
        self.stats["result"] = {"action": move.name, "ok": outcome.ok, "note": outcome.note}
        self.stats["result"].update(outcome.detail)
        if not outcome.ok:
            return self.fail(f"{move.name} failed: {outcome.note}")
        text_line = move.journal or move.summary()
        if outcome.note:
            text_line += f" · {outcome.note}"
        # Journaled before any shared write: an act whose beat then finds its pulse lost (a
        # FenceLost from the next write) is still in the journal, with its token.
        line = journal.write(wd, text_line, wd.clock())
        limits.save_backoff(wd, None)
        if outcome.held:
            self.stats["held_as"] = outcome.held  # the approval ask a human must answer
        runs.prune(wd.paths, wd.config.limits.runs_keep)
        wake = self.now + move.next_interval_s if move.next_interval_s is not None else None
        return Verdict(BeatOutcome.DECIDED, move.to_json(), line, next_wake=wake, stats=self.stats)
