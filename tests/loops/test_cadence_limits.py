"""No cadence value makes a command crash: each is a schedule or an error naming its goal."""

from __future__ import annotations

import pytest

from looop_py import jsonio
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop

HOSTILE = [
    "every 99999999999999d",  # once crashed `looop loops` with OSError(75) -> exit 70
    "every 367d",
    "every " + "9" * 5000 + "s",
    "every 1e9s",
    'cron "0 0 31 2 *"',
    "weekly funday 09:00",
]


def hostile_goal(wd: Paths, cadence: str) -> None:
    (wd.goals / "welcome.md").unlink()
    body = f"---\nintent: huge\nlevel: L1\ncadence: {cadence}\nruntime: shell\n"
    body += "maker: |\n  true\nchecker: |\n  true\n---\n# huge\n"
    (wd.goals / "huge.md").write_text(body)


@pytest.mark.parametrize("cadence", HOSTILE)
def test_an_out_of_range_cadence_is_an_error_naming_the_goal_in_every_view(
    wd: Paths, cadence: str
) -> None:
    hostile_goal(wd, cadence)
    root = ("-C", str(wd.root))
    assert invoke_looop(*root, "pulse").returncode == 0  # the pulse schedules what parses
    listed = invoke_looop(*root, "loops")
    assert listed.returncode == 0, listed.stderr
    assert "goals/huge.md" in listed.stdout + listed.stderr
    as_json = invoke_looop(*root, "loops", "--json")
    assert as_json.returncode == 0
    errors = jsonio.loads(as_json.stdout)["errors"]
    assert list(errors) == ["huge"] and len(errors["huge"]) < 300
    for args in (("status",), ("status", "--json"), ("rounds", "--all")):
        r = invoke_looop(*root, *args)
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    run = invoke_looop(*root, "run", "huge")
    assert run.returncode == 2 and "huge" in run.stderr


def test_the_longest_interval_lists_with_a_next_run_a_year_away(wd: Paths) -> None:
    hostile_goal(wd, "every 366d")
    root = ("-C", str(wd.root))
    assert invoke_looop(*root, "pulse").returncode == 0  # registers it in the schedule book
    listed = jsonio.loads(invoke_looop(*root, "loops", "--json").stdout)
    (loop,) = listed["loops"]
    assert loop["name"] == "huge" and loop["next_fire_ts"] is not None
    assert invoke_looop(*root, "loops").returncode == 0
