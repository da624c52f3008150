from __future__ import annotations

import re

from looop_py.beat import prompt as p

ORDER = [
    "INSTRUCTIONS",
    "CONSTITUTION",
    "PLAYBOOK",
    "GOALS",
    "SENSOR READINGS",
    "PENDING ASKS",
    "FAIRNESS",
    "RECENT JOURNAL",
    "WHAT CHANGED",
    "RUN_SHELL OUTPUT",
    "LAST FAILURE",
    "NOW",
]


def _input(**kw: object) -> p.PromptInput:
    base: dict[str, object] = dict(
        now=1_700_000_000.0,
        playbook="Be careful.",
        goals=[("a", "# A\n"), ("b", "# B\n")],
        snapshots=[("sensor-x", {"signal": 1, "detail": {}})],
        asks=[{"id": "w-1", "kind": "question", "asker": "w", "age_s": 5, "prompt": "ok?"}],
        goal_ages={"a": 10.0, "b": None},
        journal=["- 2026-01-01 10:00 noop"],
        changed=[{"item": "snap:sensor-x", "old": "0", "new": "1"}],
        last_shell={"cmd": "ls", "exit_code": 0, "output": "file"},
        last_failure="rejected decision: unknown action",
    )
    base.update(kw)
    return p.PromptInput(**base)  # type: ignore[arg-type]


def test_sections_run_stable_to_volatile() -> None:
    text = p.build(_input())
    found = [m.group(1) for m in re.finditer(r"^=== ([A-Z_ ]+?)(?: \(.*\))? ===$", text, re.M)]
    assert found == ORDER


def test_prefix_before_what_changed_is_byte_identical_across_beats() -> None:
    a = p.build(_input())
    b = p.build(
        _input(
            now=1_800_000_000.0,
            changed=[],
            journal=["- x"],
            last_failure=None,
            goal_ages={"a": 99.0, "b": 5.0},
        )
    )
    cut = a.index("=== FAIRNESS")
    assert a[:cut] == b[:cut]


def test_fairness_prefers_the_never_acted_goal() -> None:
    assert "Most neglected goal: b (last acted on: never)" in p.build(_input())
    text = p.build(_input(goal_ages={"a": 7200.0, "b": 60.0}))
    assert "Most neglected goal: a (last acted on: 2h ago)" in text


def test_item_caps_and_total_cap_leave_visible_markers() -> None:
    goals = [(f"g{i}", "y" * 9000) for i in range(100)]
    text = p.build(_input(goals=goals), total_cap=64 * 1024)
    assert "[… truncated:" in text
    assert "(section truncated:" in text
    assert len(text.encode()) <= 64 * 1024 + 4096
    assert "=== NOW ===" in text  # the tail always survives


def test_forced_decide_says_why() -> None:
    text = p.build(_input(changed=[], forced_by="next-interval"))
    assert "this decide was forced: next-interval" in text


def test_flapping_sensors_are_named() -> None:
    text = p.build(_input(flapping=["snap:sensor-x"]))
    assert "FLAPPING" in text and "snap:sensor-x" in text
