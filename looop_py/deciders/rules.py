"""The rules decider: the offline default. No model; deterministic moves from what changed.

1. A sensor that just broke → one ask_human naming it (a broken sensor's
   signal is stable, so this fires once per breakage, not once per beat).
   Once every sensor it names reads again, the beat withdraws that ask
   (beat/healed.py): nobody is asked to fix what healed.
2. A goal whose frontmatter `on:` names a sensor that changed → start that
   goal's work: a loop round if the goal is a loop, else a worker running
   the goal's `work:` (or its body) on its `runtime:`. Goals triggered
   together are started one per beat, least recently acted first.
3. Otherwise noop.
"""

from __future__ import annotations

import re
from typing import Any

from looop_py import jsonio
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.errors import LooopError
from looop_py.workdir.frontmatter import frontmatter
from looop_py.workdir.goalfile import GoalFile
from looop_py.world import is_error_signal

FOLLOW_UP_S = 5
PENDING = "rules-pending.json"  # in state/: goals triggered and not started yet
BROKEN_HEADER = "These sensors just started failing, so the loop is partly blind:\n"
# Compiled (and cached by re) on the first such ask, not at every full beat's import.
_BROKEN_LINE = r"^- sensors/([^/\s]+)\.sh: "


def sensors_in_broken_ask(prompt: str) -> list[str]:
    """The sensors a rules "just started failing" ask names; [] for any other ask."""
    if not prompt.startswith(BROKEN_HEADER):
        return []
    return re.findall(_BROKEN_LINE, prompt, re.MULTILINE)


def _signal(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return jsonio.loads(value)
    except jsonio.JSONDecodeError:
        return value


def _sensor_name(item: str) -> str | None:
    return item.removeprefix("snap:sensor-") if item.startswith("snap:sensor-") else None


_Spec = tuple[dict[str, Any], GoalFile]  # a goal's frontmatter, and the goal


def _save(request: DecideRequest, pending: list[str], stored: Any) -> None:
    """The queue, durably, unless the file already holds exactly it: a full beat with
    nothing queued writes (and fsyncs) nothing."""
    record = {"v": 1, "pending": pending}
    if record != stored:
        jsonio.write_json(request.state_dir / PENDING, record)


class RulesDecider:
    name = "rules"
    reads_prompt = False  # works from the changes, snapshots and goal frontmatter

    def decide(self, request: DecideRequest) -> Decision:
        # Triggers are queued first, whatever move this beat makes: the world hash
        # is committed after it, so a change not queued now would be lost.
        specs, pending, stored = self._queue(request)
        move = self._broken_sensors(request)
        if move is not None:
            if self._ready(request, pending):
                move["next_interval_s"] = FOLLOW_UP_S  # the queued goals start next
            _save(request, pending, stored)
        else:
            move = self._triggered_goal(request, specs, pending, stored)
        if move is None:
            n = len(request.changed)
            move = {"action": "noop", "reason": f"no rule matched the {n} change(s)"}
        return Decision(move=move, raw=jsonio.dumps(move).decode())

    def _broken_sensors(self, request: DecideRequest) -> dict[str, Any] | None:
        broken = []
        for c in request.changed:
            name = _sensor_name(c.item)
            new, old = _signal(c.new), _signal(c.old)
            if name and is_error_signal(new) and not is_error_signal(old):
                snap = request.snapshots.get(f"sensor-{name}", {})
                detail = snap.get("detail") if isinstance(snap, dict) else None
                message = detail.get("message", "") if isinstance(detail, dict) else ""
                stderr = detail.get("stderr", "") if isinstance(detail, dict) else ""
                line = f"- sensors/{name}.sh: {jsonio.canonical(new).decode()} {message}".rstrip()
                broken.append(line + (f"\n  stderr: {stderr[-300:]}" if stderr else ""))
        if not broken:
            return None
        prompt = (
            BROKEN_HEADER
            + "\n".join(broken)
            + "\nPlease fix the scripts (run them by hand from the work dir to see why), "
            "then answer this ask with what you changed."
        )
        return {
            "action": "ask_human",
            "prompt": prompt,
            "journal": f"{len(broken)} sensor(s) broke",
        }

    def _queue(self, request: DecideRequest) -> tuple[dict[str, _Spec], list[str], Any]:
        """Each fenced goal's frontmatter, the goals waiting to start (stored ones first),
        and the queue's record as it was read.

        A goal without a `---` fence has none, so no `on:`: it is not read and has no spec
        (at 10,000 goals a full beat opens only the fenced ones, and the one it starts)."""
        changed_sensors = {n for c in request.changed if (n := _sensor_name(c.item))}
        specs: dict[str, _Spec] = {}
        # A goal that cannot be read (or whose frontmatter does not parse) triggers nothing.
        unparsed: set[str] = set()
        for goal in [g for g in request.goals if g.fenced and g.error is None]:
            try:
                meta, _ = frontmatter(goal.text())
            except LooopError:
                unparsed.add(goal.id)
                continue
            specs[goal.id] = (meta, goal)
        try:
            stored = jsonio.read_json(request.state_dir / PENDING, {})
        except LooopError:
            stored = {}
        queued = stored.get("pending") if isinstance(stored, dict) else None
        queued = queued if isinstance(queued, list) else []  # a damaged cache starts empty
        # Only a queue that holds something needs the readable goals (at 10,000: one pass).
        readable = {g.id for g in request.goals if g.error is None} - unparsed if queued else ()
        pending = [g for g in queued if isinstance(g, str) and g in readable]
        for goal_id, (meta, _) in specs.items():
            on = meta.get("on") or []
            on = [on] if isinstance(on, str) else on if isinstance(on, list) else []
            if changed_sensors & {str(s) for s in on} and goal_id not in pending:
                pending.append(goal_id)
        plain = set(pending) - specs.keys()  # plain goals still queued from before
        for goal in request.goals if plain else ():
            if goal.id in plain:
                specs[goal.id] = ({}, goal)  # no frontmatter: an empty spec
        return specs, pending, stored

    def _ready(self, request: DecideRequest, pending: list[str]) -> list[str]:
        live = request.live_workers
        acted = request.last_acted
        return sorted((g for g in pending if g not in live), key=lambda g: acted.get(g) or 0.0)

    def _triggered_goal(
        self,
        request: DecideRequest,
        specs: dict[str, _Spec],
        pending: list[str],
        stored: Any,
    ) -> dict[str, Any] | None:
        live = request.live_workers
        ready = self._ready(request, pending)
        if not ready:
            _save(request, pending, stored)
            return None
        goal_id = ready[0]
        pending.remove(goal_id)
        _save(request, pending, stored)
        from looop_py.engine.spec import is_loop  # only when a goal starts (the gate loads it)

        meta, goal = specs[goal_id]
        body = frontmatter(goal.text())[1] if goal.fenced else goal.text()
        move: dict[str, Any]
        if is_loop(meta):
            move = {"action": "start_round", "loop": goal_id}
        else:
            move = {
                "action": "start_worker",
                "id": goal_id,
                "prompt": str(meta.get("work") or body),
            }
            if meta.get("runtime"):
                move["runtime"] = str(meta["runtime"])
            if meta.get("verify"):
                move["verify"] = str(meta["verify"])
        move["journal"] = f"rules: a sensor in {goal_id}'s `on:` changed"
        if [g for g in pending if g not in live]:
            move["next_interval_s"] = FOLLOW_UP_S  # more triggered goals wait their turn
        return move
