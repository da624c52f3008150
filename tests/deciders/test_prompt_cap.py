"""The prompt keeps its cap, fairly: looop's own probes and what changed before the bulk."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from looop_py.beat.pulse import beat
from looop_py.deciders import prompt as p
from looop_py.workdir.paths import Paths
from tests.beat.test_decide import Seq
from tests.conftest import open_wd, write_sensor

SYS = ["sys-asks", "sys-claims", "sys-goals", "sys-rounds", "sys-schedules", "sys-sessions"]


def _sys_snapshots() -> list[tuple[str, dict[str, object]]]:
    return [(stem, {"signal": {"probe": stem}, "detail": {"x": "d" * 500}}) for stem in SYS]


def _ten_thousand_goals() -> p.PromptInput:
    goals = [(f"goal-{i:05}", f"# Goal {i}\n\n" + "keep it tidy. " * 40) for i in range(10_000)]
    changed = [{"item": f"goal:{gid}", "old": None, "new": "xxh3:1"} for gid, _ in goals]
    changed += [{"item": "snap:sys-sessions", "old": "[]", "new": '[{"id":"w"}]'}]
    return p.PromptInput(
        now=time.time(),
        playbook="Be careful. " * 5000,
        goals=goals,
        snapshots=[*_sys_snapshots(), ("sensor-x", {"signal": 1, "detail": {}})],
        journal=["- j" * 100] * 20,
        changed=changed,
        asks=[
            {"id": f"a-{i}", "kind": "question", "asker": "h", "age_s": 1, "prompt": "q" * 900}
            for i in range(500)
        ],
        last_failure="x" * 10_000,
        last_shell={"cmd": "ls", "exit_code": 0, "output": "o" * 10_000},
    )


def _noisy_sensors() -> p.PromptInput:
    snaps = [
        (f"sensor-n{i:03}", {"signal": {"v": "z" * 3000}, "detail": {"d": "y" * 3000}})
        for i in range(200)
    ]
    return p.PromptInput(
        now=time.time(),
        playbook="ok",
        goals=[("g", "# g")],
        snapshots=sorted([*snaps, *_sys_snapshots()]),
        changed=[{"item": f"snap:{s}", "old": "1", "new": "2"} for s, _ in snaps],
    )


@pytest.mark.parametrize("cap", [16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024])
@pytest.mark.parametrize("make", [_ten_thousand_goals, _noisy_sensors], ids=["goals", "sensors"])
def test_the_cap_is_never_exceeded_and_the_probes_are_always_there(make: object, cap: int) -> None:
    inp = make()  # type: ignore[operator]
    text = p.build(inp, total_cap=cap)
    assert len(text.encode()) <= cap
    for stem in SYS:
        assert f"--- {stem}\n" in text, stem
    assert "=== NOW ===" in text and "Answer with one JSON move now." in text
    if cap < 1024 * 1024:  # a 1 MiB cap holds all 200 readings (each capped at 4 KiB)
        assert "This prompt was cut to fit its" in text  # the cut is named


def test_ten_thousand_goals_what_changed_is_capped_with_a_count_and_goals_still_show() -> None:
    text = p.build(_ten_thousand_goals(), total_cap=256 * 1024)
    start = text.index("=== WHAT CHANGED")
    changed = text[start : text.index("\n=== ", start)]
    assert len(changed.encode()) <= 0.21 * 256 * 1024
    m = re.search(r"\(section truncated: (\d+) more changes not shown\)", changed)
    assert m and int(m.group(1)) > 5000
    assert changed.index("snap:sys-sessions") < changed.index("goal:")  # probes first
    goals = text[text.index("=== GOALS ===") : text.index("=== SENSOR READINGS")]
    assert goals.count("--- goals/") >= 50  # the goals section is not starved
    assert re.search(r"not shown: \d+ of 10000 goals", text)


def test_two_hundred_noisy_sensors_keep_the_sys_probes_first() -> None:
    text = p.build(_noisy_sensors(), total_cap=256 * 1024)
    readings = text[text.index("=== SENSOR READINGS") : text.index("=== PENDING ASKS")]
    assert all(f"--- {s}\n" in readings for s in SYS)
    assert readings.index("--- sys-") < readings.index("--- sensor-")
    assert "more readings not shown" in readings


def test_goals_that_changed_are_kept_when_goals_are_cut() -> None:
    goals = [(f"g{i:04}", "body " * 300) for i in range(2000)]
    inp = p.PromptInput(
        now=0.0,
        playbook=None,
        goals=goals,
        snapshots=[],
        changed=[{"item": "goal:g1999", "old": "a", "new": "b"}],
    )
    text = p.build(inp, total_cap=32 * 1024)
    assert "--- goals/g1999.md" in text and len(text.encode()) <= 32 * 1024


def test_a_small_prompt_is_not_cut() -> None:
    inp = p.PromptInput(now=0.0, playbook="p", goals=[("a", "# A")], snapshots=_sys_snapshots())
    text = p.build(inp)
    assert "cut to fit" not in text and "truncated" not in text


@pytest.mark.slow
def test_a_real_beat_with_ten_thousand_goals_and_200_sensors(wd: Paths) -> None:
    for i in range(10_000):
        (wd.goals / f"goal-{i:05}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    for i in range(200):
        write_sensor(wd, f"n{i:03}", f"head -c 3000 /dev/zero | tr '\\0' '{i % 10}'")
    wd.config.write_text('[decider]\nbackend = "noop"\n[sensors]\nmax_bytes = 4096\n')
    assert beat(open_wd(wd), decider=Seq()).outcome == "decided"  # it reads the prompt
    prompt = max(Path(wd.runs).iterdir()).joinpath("prompt.md").read_text()
    assert len(prompt.encode()) <= 256 * 1024
    for stem in SYS:
        assert f"--- {stem}\n" in prompt
