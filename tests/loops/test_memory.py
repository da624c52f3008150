"""A loop's memory: entries with stable ids that expire (`memory_ttl_days`), pruned when
the loop records, recalled by loop and by tag."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from looop_py import LoopEngine, LoopLevel, LoopSpec, jsonio
from looop_py.engine.inproc import ListMemory, ScriptedWorkers, done
from looop_py.engine.ports import MemoryEntry
from looop_py.engine.spec import DEFAULT_MEMORY_TTL_DAYS, LoopSpecError
from looop_py.loops.store import JsonlMemory, memory_of
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd

DAY = 86_400.0
T0 = 1_800_000_000.0
ROOT = Path(__file__).resolve().parents[2]


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def frontmatter(**extra: object) -> dict[str, object]:
    return {"intent": "keep notes", "level": "L1", "maker": "m", "checker": "c", **extra}


# -- rainy day: what a person may write ---------------------------------------------------


@pytest.mark.parametrize(
    "ttl", [0, -1, "7", "7d", True, float("nan"), float("inf"), 1e9, 10**400, [7], {"d": 7}]
)
def test_a_bad_memory_ttl_is_an_error_naming_the_loop(ttl: object) -> None:
    with pytest.raises(LoopSpecError) as caught:
        LoopSpec.from_frontmatter("notes", frontmatter(memory_ttl_days=ttl))
    assert caught.value.message.startswith("loop notes: memory_ttl_days should be")
    assert len(caught.value.message) < 160  # a 400-digit number is clipped


def test_a_bad_memory_ttl_in_a_goal_is_listed_not_a_crash(wd: Paths) -> None:
    goal = wd.goals / "notes.md"  # type: ignore[attr-defined]
    goal.write_text("---\nintent: keep notes\nlevel: L1\nmaker: m\nmemory_ttl_days: -3\n---\n")
    listed = invoke_looop("-C", str(wd.root), "loops")
    assert listed.returncode == 0, listed.stderr
    assert "memory_ttl_days should be" in listed.stdout + listed.stderr


def test_a_misspelt_memory_ttl_is_named() -> None:
    with pytest.raises(LoopSpecError) as caught:
        LoopSpec.from_frontmatter("notes", frontmatter(memory_ttl_day=3))
    assert caught.value.hint == "did you mean 'memory_ttl_days'?"


def test_the_ttl_defaults_and_null_keeps_forever() -> None:
    spec = LoopSpec.from_frontmatter("notes", frontmatter())
    assert spec.memory_ttl_days == DEFAULT_MEMORY_TTL_DAYS == 30.0
    assert spec.memory_expires(T0) == T0 + 30 * DAY
    forever = LoopSpec.from_frontmatter("notes", frontmatter(memory_ttl_days=None))
    assert forever.memory_ttl_days is None and forever.memory_expires(T0) is None
    week = LoopSpec.from_frontmatter("notes", frontmatter(memory_ttl_days=7))
    assert LoopSpec.from_json(week.to_json()).memory_ttl_days == 7.0


# -- expiry -------------------------------------------------------------------------------


def test_an_expired_entry_is_never_recalled_and_pruned_when_the_loop_records(
    tmp_path: Path,
) -> None:
    clock = Clock()
    spec = LoopSpec("notes", "keep notes", LoopLevel.L1_REPORT).with_memory_ttl_days(1)
    memory = JsonlMemory(tmp_path / "memory", clock)
    first = ScriptedWorkers([done("first finding"), done("first checked")])
    LoopEngine(spec, first, memory=memory, clock=clock, sleep=clock.sleep).run_once()
    (entry,) = memory.recall("notes", 5)
    assert entry.expires == pytest.approx(entry.created + DAY)

    clock.t += 2 * DAY  # past its day: the next round does not see it …
    assert memory.recall("notes", 5) == []
    second = ScriptedWorkers([done("second finding"), done("second checked")])
    LoopEngine(spec, second, memory=memory, clock=clock, sleep=clock.sleep).run_once()
    assert "first" not in second.requests[0].prompt
    # … and recording it pruned the file: one line left, the second round's
    lines = (tmp_path / "memory" / "notes.jsonl").read_text().splitlines()
    assert len(lines) == 1 and "second checked" in lines[0]


def test_a_stale_entry_from_a_memory_that_does_not_prune_is_not_recalled() -> None:
    # The engine filters by time itself: a Memory written to an older protocol
    # (recall returns what it has) still never feeds an expired entry to the maker.
    class Keeps:
        def recall(self, loop: str, k: int) -> list[MemoryEntry]:
            return [MemoryEntry("stale", expires=T0 - 1), MemoryEntry("fresh", expires=T0 + 1)]

        def record(self, loop: str, entry: MemoryEntry) -> None:
            return None

    clock = Clock()
    workers = ScriptedWorkers([done("m"), done("c")])
    spec = LoopSpec("notes", "keep notes", LoopLevel.L1_REPORT)
    LoopEngine(spec, workers, memory=Keeps(), clock=clock, sleep=clock.sleep).run_once()
    assert "- fresh" in workers.requests[0].prompt and "stale" not in workers.requests[0].prompt


def test_list_memory_prunes_and_filters_too() -> None:
    clock = Clock()
    memory = ListMemory({"a": [MemoryEntry("old", created=T0 - 9, expires=T0 - 1)]}, clock)
    assert memory.recall("a", 5) == []
    memory.record("a", MemoryEntry("new", created=T0, expires=T0 + DAY))
    assert [e.content for e in memory.entries["a"]] == ["new"]


# -- ids ----------------------------------------------------------------------------------


def _ids_in_a_new_process(directory: Path, loop: str) -> list[str]:
    code = (
        "import sys, json; from pathlib import Path\n"
        "from looop_py.loops.store import JsonlMemory\n"
        f"memory = JsonlMemory(Path({str(directory)!r}))\n"
        f"print(json.dumps([e.id for e in memory.recall({loop!r}, 50)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return list(jsonio.loads(out.stdout))


def test_ids_are_stable_across_restarts_even_for_lines_written_without_one(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "memory"
    directory.mkdir()
    old = {"content": "reported — before ids", "tags": ["notes"], "created": T0 - 5, "round": "r0"}
    (directory / "notes.jsonl").write_text(jsonio.dumps(old).decode() + "\n")
    memory = JsonlMemory(directory, Clock())
    memory.record(
        "notes", MemoryEntry("reported — with an id", ("notes",), created=T0, round_id="r1")
    )
    here = [e.id for e in memory.recall("notes", 50)]
    assert len(set(here)) == 2 and all(i.startswith("m-") for i in here)
    assert _ids_in_a_new_process(directory, "notes") == here  # a restart reads the same ids
    assert _ids_in_a_new_process(directory, "notes") == here
    # an entry differing only in its round or time is another entry
    twin = MemoryEntry("reported — with an id", ("notes",), created=T0, round_id="r2")
    assert twin.id not in here


def test_a_round_recorded_in_a_work_dir_keeps_its_id(wd: Paths) -> None:
    clock = Clock()
    memory = memory_of(open_wd(wd, clock))
    memory.record("notes", MemoryEntry("found it", ("notes", "loop-state"), created=T0))
    (line,) = (wd.memory / "notes.jsonl").read_text().splitlines()  # type: ignore[attr-defined]
    stored = jsonio.loads(line)
    assert stored["id"] == memory.recall("notes", 1)[0].id
    assert stored["expires"] is None  # an entry recorded without one never expires


# -- recall by loop and by tag ----------------------------------------------------------------


def test_recall_by_loop_and_by_tag(tmp_path: Path) -> None:
    clock = Clock()
    memory = JsonlMemory(tmp_path / "memory", clock)
    memory.record("a", MemoryEntry("a1", ("a", "loop-state"), created=T0 - 30))
    memory.record("b", MemoryEntry("b1", ("b", "loop-state", "ci"), created=T0 - 20))
    memory.record("a", MemoryEntry("a2", ("a", "loop-state", "ci"), created=T0 - 10))
    memory.record("a", MemoryEntry("gone", ("a", "ci"), created=T0 - 9, expires=T0 - 1))
    assert [e.content for e in memory.recall("a", 5)] == ["a1", "a2"]
    assert [e.content for e in memory.recall("a", 5, tag="ci")] == ["a2"]
    assert [e.content for e in memory.recall(None, 5, tag="ci")] == ["b1", "a2"]
    assert [e.content for e in memory.recall(None, 1, tag="loop-state")] == ["a2"]
    assert memory.recall("c", 5, tag="ci") == []
    with pytest.raises(Exception, match="by a tag"):
        memory.recall(None, 5)
