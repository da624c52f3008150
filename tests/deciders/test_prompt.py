from __future__ import annotations

import re

from looop_py.deciders import prompt as p

ORDER = [
    "INSTRUCTIONS",
    "CONSTITUTION",
    "PLAYBOOK",
    "GOALS",
    "SENSOR READINGS",
    "WHAT CHANGED",
    "CHANGED READINGS",
    "PENDING ASKS",
    "FAIRNESS",
    "RECENT JOURNAL",
    "READING DETAILS",
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
            changed=[{"item": "snap:sensor-x", "old": "7", "new": "1"}],
            journal=["- x"],
            last_failure=None,
            goal_ages={"a": 99.0, "b": 5.0},
        )
    )
    cut = a.index("=== WHAT CHANGED")
    assert a[:cut] == b[:cut]


def test_detail_that_changes_every_beat_never_reaches_the_stable_part() -> None:
    def snaps(at: float, claims: int) -> list[tuple[str, object]]:
        return [
            ("sensor-ci", {"signal": "green", "detail": {"checked_at": at, "took_ms": at % 97}}),
            ("sys-claims", {"signal": [{"name": "deploy"}], "detail": {"expires": at + 60}}),
            ("sys-goals", {"signal": {}, "detail": {"goals": {"a": {"age_s": claims}}}}),
        ]

    a = p.build(_input(now=1000.0, snapshots=snaps(1000.0, 3), changed=[], asks=[]))
    b = p.build(_input(now=1060.0, snapshots=snaps(1060.0, 4), changed=[], asks=[]))
    cut = a.index("=== WHAT CHANGED")
    assert a[:cut] == b[:cut] and b.index("=== WHAT CHANGED") == cut
    assert '"checked_at":1000.0' in a[a.index("=== READING DETAILS") :]  # detail shown, last
    assert "checked_at" not in a[:cut] and "expires" not in a[:cut]


def test_a_changed_reading_leaves_the_stable_part_for_the_volatile_tail() -> None:
    snaps = [("sensor-a", {"signal": 1}), ("sensor-b", {"signal": 2}), ("sensor-c", {"signal": 3})]
    text = p.build(
        _input(snapshots=snaps, changed=[{"item": "snap:sensor-b", "old": "1", "new": "2"}])
    )
    stable = text[: text.index("=== WHAT CHANGED")]
    assert "--- sensor-a\n1" in stable and "--- sensor-c\n3" in stable
    assert "--- sensor-b" not in stable
    tail = text[text.index("=== CHANGED READINGS") :]
    assert tail.startswith("=== CHANGED READINGS (signals now) ===\n--- sensor-b\n2\n")


def test_goals_render_sorted_by_id_whatever_order_they_come_in() -> None:
    a = p.build(_input(goals=[("b", "# B\n"), ("a", "# A\n")]))
    assert a == p.build(_input(goals=[("a", "# A\n"), ("b", "# B\n")]))
    assert a.index("--- goals/a.md") < a.index("--- goals/b.md")


def test_blocks_cut_the_prompt_into_policy_readings_and_the_volatile_rest() -> None:
    text = p.build(_input())
    policy, readings, rest = p.blocks(text)
    assert policy + readings + rest == text
    assert policy.startswith("=== INSTRUCTIONS") and "=== GOALS" in policy
    assert readings.startswith("=== SENSOR READINGS") and rest.startswith("=== WHAT CHANGED")


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


def test_volatility_keeps_since_for_parts_that_stood_still() -> None:
    from looop_py.deciders import volatility

    snaps = [("sensor-a", {"signal": 1, "detail": {"at": 1}}), ("sensor-b", {"signal": 2})]
    state, since = volatility.advance({}, volatility.parts(snaps), 100.0)
    # The first prompt: signals count as old, a detail as moving until it stands still.
    assert since == {"signal:sensor-a": 0.0, "detail:sensor-a": 100.0, "signal:sensor-b": 0.0}
    moved = [("sensor-a", {"signal": 1, "detail": {"at": 2}}), ("sensor-b", {"signal": 2})]
    moved += [("sensor-c", {"signal": 3})]
    state, since = volatility.advance(state, volatility.parts(moved), 160.0)
    assert since == {
        "signal:sensor-a": 0.0,
        "detail:sensor-a": 160.0,  # changed at this prompt
        "signal:sensor-b": 0.0,
        "signal:sensor-c": 160.0,  # appeared at this prompt
    }
    broken = {"signal:sensor-a": "junk", "signal:sensor-b": [state["signal:sensor-b"][0], True]}
    _, since = volatility.advance(broken, volatility.parts(snaps), 200.0)
    assert since["signal:sensor-a"] == since["signal:sensor-b"] == 200.0  # damage reads as new


def test_the_stable_part_runs_oldest_first_and_takes_details_that_stood_still() -> None:
    snaps = [
        ("sensor-a", {"signal": 1, "detail": {"build": 7}}),
        ("sensor-b", {"signal": 2, "detail": {"checked_at": 999}}),
        ("sys-claims", {"signal": [], "detail": {"count": 0}}),
    ]
    since = {
        "signal:sensor-a": 500.0,  # changed at the previous prompt: last of the stable part
        "detail:sensor-a": 0.0,
        "signal:sensor-b": 0.0,
        "detail:sensor-b": 1000.0,  # changed at this prompt: the volatile tail
        "signal:sys-claims": 0.0,
        "detail:sys-claims": 0.0,
    }
    text = p.build(_input(now=1000.0, snapshots=snaps, changed=[], since=since))
    stable = text[text.index("=== SENSOR READINGS") : text.index("=== WHAT CHANGED")]
    heads = re.findall(r"^--- (.+)$", stable, re.M)
    assert heads == [
        "sys-claims",
        "sys-claims (detail)",
        "sensor-a (detail)",
        "sensor-b",
        "sensor-a",
    ]
    tail = text[text.index("=== READING DETAILS") :]
    assert '--- sensor-b (detail)\n{"checked_at":999}' in tail and "sensor-a" not in tail
