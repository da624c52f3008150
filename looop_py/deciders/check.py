"""`looop decider test`: one tiny decide through the configured backend, nothing executed."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from looop_py.deciders import load
from looop_py.deciders.base import DecideError, request_in
from looop_py.moves import union
from looop_py.workdir import config as config_mod
from looop_py.workdir.paths import Paths

TEST_PROMPT = """\
This is a connectivity check from `looop decider test`: nothing you propose will run.
Reply with exactly one JSON object and nothing else. It must be this looop move:
{"action": "noop", "reason": "decider test"}
"""


def run_test(paths: Paths, now: float) -> dict[str, Any]:
    cfg = config_mod.load(paths.config, paths.config_cache)
    backend = load(cfg)
    request = request_in(paths, now, forced=True, prompt=TEST_PROMPT)
    view: dict[str, Any] = {
        "backend": cfg.decider.backend,
        "ok": False,
        "move": None,
        "invalid": None,
        "error": None,
        "hint": None,
        "usage": None,
        "ms": 0,
        "meta": {},
        "raw": "",
    }
    started = time.monotonic()
    try:
        decision = backend.decide(request)
    except DecideError as exc:
        view.update(error=exc.message, hint=exc.hint, raw=exc.raw[:2000])
        view["ms"] = round((time.monotonic() - started) * 1000)
        return view
    view["ms"] = round((time.monotonic() - started) * 1000)
    view.update(move=decision.move, raw=decision.raw[:2000], meta=dict(decision.meta))
    if decision.usage is not None:
        view["usage"] = {**asdict(decision.usage), "total_tokens": decision.usage.total_tokens}
    try:
        union.parse(decision.move)
    except union.MoveError as exc:
        view["invalid"] = exc.message
    else:
        view["ok"] = True
    return view
