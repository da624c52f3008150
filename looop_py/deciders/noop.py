"""The noop decider: always proposes `noop`. Useful to watch sensing alone."""

from __future__ import annotations

from looop_py.deciders.base import DecideRequest, Decision


class NoopDecider:
    name = "noop"
    reads_prompt = False  # proposes noop whatever the world: no prompt is built

    def decide(self, request: DecideRequest) -> Decision:
        move = {"action": "noop", "reason": f"{len(request.changed)} item(s) changed"}
        return Decision(move=move, raw="")
