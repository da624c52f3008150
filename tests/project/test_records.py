"""`@record` (looop_py/records.py): frozen where our code is checked, plain at run time.

The freeze a `@record` gives up at run time is kept by the type checker: mypy, strict, as
the project's checks run it, refuses an assignment to a record's field (of a record
declared here, and of the records the beat passes around). At run time a record has no
generated `__setattr__`/`__delattr__` (what makes it cheap to create) and is compared by
identity, as the frozen `eq=False` dataclasses it replaced were.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.records import record

ROOT = Path(__file__).resolve().parents[2]

ASSIGNS = """
from __future__ import annotations

import dataclasses

from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.moves.union import Move, Noop
from looop_py.records import record


@record(slots=True)
class Point:
    \"\"\"Two numbers.\"\"\"

    x: int
    y: int = 0


point = Point(1)
point.x = 2
result = BeatResult(BeatOutcome.SKIPPED)
result.outcome = BeatOutcome.FAILED
move = Move(Noop())
move.journal = "rewritten"
moved = dataclasses.replace(point, x=3)  # a new record: allowed
"""


def _mypy(source: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(snippet)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.timeout(300)
def test_mypy_refuses_every_assignment_to_a_record_and_allows_a_replace(tmp_path: Path) -> None:
    done = _mypy(ASSIGNS, tmp_path)
    lines = [line for line in done.stdout.splitlines() if ": error:" in line]
    refused = {int(line.split(":")[1]) for line in lines}
    source = ASSIGNS.splitlines()
    wanted = {n for n, text in enumerate(source, 1) if "point.x =" in text or ".outcome =" in text}
    wanted |= {n for n, text in enumerate(source, 1) if ".journal =" in text}
    assert len(wanted) == 3
    assert refused == wanted, done.stdout + done.stderr
    assert all("is read-only" in line for line in lines), done.stdout


def test_a_record_has_no_generated_setattr_and_compares_by_identity() -> None:
    @record(slots=True)
    class Point:
        """Two numbers."""

        x: int
        y: int = 0

    assert "__setattr__" not in Point.__dict__ and "__delattr__" not in Point.__dict__
    assert "__eq__" not in Point.__dict__
    a, b = Point(1), Point(1)
    assert a != b and len({a, b}) == 2
    assert BeatResult(BeatOutcome.SKIPPED) != BeatResult(BeatOutcome.SKIPPED)
    with pytest.raises(AttributeError):  # slots: no attribute beyond the fields
        a.z = 1  # type: ignore[attr-defined]
