"""A backend that reads no prompt (rules, noop) gets none: the beat reads no goal to build
it and writes no runs/<id>/prompt.md; the rules decider still reads every fenced goal it
acts on, as it was hashed. A backend that reads the prompt still gets all of it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from looop_py.beat import pulse
from looop_py.deciders.base import reads_prompt, request_in
from looop_py.deciders.rules import RulesDecider
from looop_py.sensing.sense import World, sense
from looop_py.workdir import goalcache
from looop_py.workdir.goalfile import CHANGED_SINCE
from looop_py.workdir.paths import Paths
from looop_py.world import Change
from tests.conftest import open_wd, wait_for
from tests.freshbeat import after_full_beat
from tests.opens import counted

FENCED = "---\non: [ci]\nruntime: shell\nwork: echo {word}\n---\n# Fenced\n"


def _day_old(path: Path) -> None:
    """Older than the goal cache's racy window, so a beat writes it down and the next one
    knows it by its stat."""
    day_ago = time.time() - 86400
    os.utime(path, (day_ago, day_ago))
    ctime = path.stat().st_ctime_ns
    wait_for(lambda: time.time_ns() - ctime > goalcache.RACY_NS, what="the racy window")


def _edited_before_decide(wd: Paths, seen: World) -> dict[str, Any]:
    """The goal edited after SENSE, then the rules decider on what SENSE saw (ci changed)."""
    (wd.goals / "fenced.md").write_text(FENCED.format(word="EDITED"))
    ci_changed = (Change("snap:sensor-ci", '"green"', '"red"'),)
    request = request_in(
        wd, time.time(), items=seen.items, changed=ci_changed, goals=seen.goals, forced=True
    )
    move: dict[str, Any] = RulesDecider().decide(request).move
    return move


# -- rainy days first ---------------------------------------------------------------------


def test_a_fenced_goal_known_by_its_stat_and_edited_before_decide_is_not_acted_on(
    wd: Paths,
) -> None:
    """The rules decider reads the goal when it decides: bytes that are not the hashed ones
    read as a notice (no fence, no `on:`), so nothing starts on text no beat hashed."""
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    (wd.goals / "fenced.md").write_text(FENCED.format(word="hashed"))
    _day_old(wd.goals / "fenced.md")
    pulse.beat(open_wd(wd), force=True)  # the cache now knows it
    seen = sense(open_wd(wd), time.time())
    fenced = next(g for g in seen.goals if g.id == "fenced")
    assert not fenced.held and fenced.fenced, "known by its stat: not read by SENSE"
    move = _edited_before_decide(wd, seen)
    assert "EDITED" not in json.dumps(move) and move["action"] == "noop", move
    assert CHANGED_SINCE in fenced.text()
    assert sense(open_wd(wd), time.time()).items["goal:fenced"] != seen.items["goal:fenced"]


def test_a_fenced_goal_read_by_sense_and_edited_before_decide_starts_as_hashed(
    wd: Paths,
) -> None:
    (wd.goals / "fenced.md").write_text(FENCED.format(word="hashed"))  # new: SENSE reads it
    seen = sense(open_wd(wd), time.time())
    assert next(g for g in seen.goals if g.id == "fenced").held
    move = _edited_before_decide(wd, seen)
    assert move["action"] == "start_worker" and move["prompt"] == "echo hashed", move


def test_a_goal_that_cannot_be_read_does_not_stop_a_promptless_beat(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    os.mkfifo(wd.goals / "fifo.md")
    (wd.goals / "broken.md").write_text("---\non: [ci\n---\n# unclosed frontmatter\n")
    result = pulse.beat(open_wd(wd), force=True)
    assert result.outcome == "decided", result
    assert result.move is not None and result.move["action"] == "noop"
    (run,) = wd.runs.iterdir()
    assert not (run / "prompt.md").exists()
    assert pulse.beat(open_wd(wd)).outcome == "skipped"  # committed: the next beat is quiet


# -- counted: what a full beat opens and writes ----------------------------------------------

OPENS = """
from looop_py.beat import pulse
result = pulse.beat(wd, force=True)
print(json.dumps({"outcome": result.outcome.value,
                  "goals": sorted(k for k in opens if k.startswith("goals/")),
                  "runs": sorted(k for k in opens if k.startswith("runs/"))}))
"""


def _last_decide(wd: Paths) -> dict[str, object]:
    events = [json.loads(line) for line in wd.events.read_text().splitlines()]
    return next(e["decide"] for e in reversed(events) if e.get("decide"))


@pytest.mark.parametrize("backend", ["rules", "noop"])
def test_a_full_beat_for_a_backend_without_a_prompt_opens_no_plain_goal(
    wd: Paths, backend: str
) -> None:
    """300 plain goals and one fenced, all known by their stat: a forced beat opens only the
    fenced goal (the rules decider reads its frontmatter, checked against the hashed digest)
    and writes no prompt.md; the beat's decide stats say prompt_bytes 0."""
    for g in wd.goals.glob("*.md"):
        g.unlink()
    for i in range(300):
        (wd.goals / f"goal-{i:03}.md").write_text(f"# Goal {i}\n\nKeep thing {i} tidy.\n")
    (wd.goals / "fenced.md").write_text(FENCED.format(word="hashed"))
    for g in wd.goals.iterdir():
        os.utime(g, (time.time() - 86400,) * 2)
    _day_old(wd.goals / "fenced.md")
    wd.config.write_text(f'[decider]\nbackend = "{backend}"\n')
    counted(wd.root, OPENS)  # cold: reads every goal once and fills the cache
    warm = counted(wd.root, OPENS)
    assert warm["outcome"] == "decided"
    assert warm["goals"] == (["goals/fenced.md"] if backend == "rules" else []), warm["goals"]
    assert not any(k.endswith("prompt.md") for k in warm["runs"]), warm["runs"]
    assert not list(wd.runs.glob("*/prompt.md"))
    assert _last_decide(wd)["prompt_bytes"] == 0

    # The same work dir with a backend that reads the prompt: it is built and archived.
    (wd.root / "moves.json").write_text(json.dumps([{"action": "noop"}] * 3))
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.json"\n')
    built = counted(wd.root, OPENS)
    assert built["outcome"] == "decided" and len(built["goals"]) > 100
    (prompt,) = wd.runs.glob("*/prompt.md")
    assert "--- goals/goal-000.md" in prompt.read_text()
    assert _last_decide(wd)["prompt_bytes"] == len(prompt.read_text())


def test_which_backends_read_the_prompt() -> None:
    """rules and noop say they read none; every other backend gets one, and so does a
    backend that does not say (the safe side)."""
    from looop_py import deciders
    from looop_py.deciders.anthropic import AnthropicDecider
    from looop_py.deciders.command import CommandDecider
    from looop_py.deciders.noop import NoopDecider
    from looop_py.deciders.openai import OpenAIDecider
    from looop_py.deciders.script import ScriptDecider

    classes = {
        "rules": RulesDecider,
        "noop": NoopDecider,
        "command": CommandDecider,
        "openai": OpenAIDecider,
        "anthropic": AnthropicDecider,
        "script": ScriptDecider,
    }
    assert set(classes) == set(deciders.FACTORIES)
    reading = {name for name, cls in classes.items() if reads_prompt(cls)}  # type: ignore[arg-type]
    assert reading == {"command", "openai", "anthropic", "script"}

    class Silent:
        name = "silent"

    assert reads_prompt(Silent()) is True  # type: ignore[arg-type]


PROMPT_MODULES = (
    "looop_py.deciders.prompt",
    "looop_py.deciders.fitting",
    "looop_py.deciders.volatility",
)
UNUSED = (
    *PROMPT_MODULES,
    "looop_py.workers.records",
    "looop_py.loops.store",
    # the full beat's fixed cost (x26i): shutil (bz2, lzma) only for a run holding a folder,
    # shlex only for a command decider, prices only to charge a decide that reported usage
    "looop_py.spend.prices",
    "shutil",
    "threading",  # jsonio and coord.choose use _thread's primitives
    "bz2",
    "lzma",
    "shlex",
    # y26i: the Python half of signal (three IntEnums) only to name what killed a sensor
    "signal",
    "looop_py.beat.prune",  # `looop prune`, and a beat's look at history when one is due
)  # no worker, no round


def _full_beat_loads(wd: Paths) -> list[str]:
    """Which of UNUSED a fresh interpreter holds after `looop pulse --force`."""
    loaded: list[str] = after_full_beat(wd.root, f"[m for m in {UNUSED!r} if m in sys.modules]")
    return loaded


def test_a_full_beat_without_a_prompt_or_a_worker_imports_neither(wd: Paths) -> None:
    _full_beat_loads(wd)  # the first beat looks at history (retention) and fills the caches
    for backend in ("rules", "noop"):
        wd.config.write_text(f'[decider]\nbackend = "{backend}"\n')
        assert _full_beat_loads(wd) == [], backend
    (wd.root / "moves.json").write_text(json.dumps([{"action": "noop"}]))
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.json"\n')
    # script reports usage (zero tokens), so its decide is charged: prices are loaded for it
    assert _full_beat_loads(wd) == [*PROMPT_MODULES, "looop_py.spend.prices"]


FSYNCS = """
import re
synced = []
real = os.fsync
def fsync(fd):
    synced.append(os.readlink(f"/proc/self/fd/{fd}"))
    return real(fd)
os.fsync = fsync
from looop_py.beat import pulse
result = pulse.beat(wd, force=True)
names = sorted({re.sub(r"[.](.+)[.][0-9]+-[0-9]+[.]tmp$", r"\\1", os.path.relpath(p, root))
                for p in synced})
print(json.dumps({"outcome": result.outcome.value, "synced": names}))
"""


def test_a_warm_full_rules_beat_fsyncs_only_its_records(wd: Paths) -> None:
    """The committed world and the decide cap's ledger are durable; the runs/ archive is
    not fsynced, and a rules queue or flap record that did not change is not written."""
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    counted(wd.root, FSYNCS)  # the first beat writes its state files
    warm = counted(wd.root, FSYNCS)
    assert warm["outcome"] == "decided"
    assert warm["synced"] == ["state/decides.json", "state/last-world.json"]


def test_a_flapping_sensor_is_still_named_when_quiet_decides_keep_the_record(wd: Paths) -> None:
    """flap.json is written only when a streak moves: forced beats where nothing changed
    leave it alone, and a sensor that changes on every woken beat is still called flapping."""
    from looop_py.beat.pulse import beat
    from tests.beat.test_decide import Seq
    from tests.conftest import write_sensor

    wd.config.write_text('[decider]\nbackend = "noop"\n[limits]\nflap_streak = 2\n')
    write_sensor(wd, "steady", "echo same")
    beat(open_wd(wd), decider=Seq())
    flap = wd.state / "flap.json"
    before = flap.stat().st_mtime_ns, flap.read_bytes()
    for _ in range(2):  # forced, nothing moved: the record stays as it is
        beat(open_wd(wd), decider=Seq(), force=True)
    assert (flap.stat().st_mtime_ns, flap.read_bytes()) == before
    seen = Seq()
    for i in range(3):  # the signal moves on every beat: two in a row make it flapping
        write_sensor(wd, "steady", f"echo {i}")
        beat(open_wd(wd), decider=seen)
    assert "FLAPPING" in seen.calls[-1].prompt and "sensor-steady" in seen.calls[-1].prompt
