"""Hostile files in the work dir: too deep, too big, not a regular file. The beat goes on."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.beat.pulse import beat
from looop_py.errors import CorruptFile
from looop_py.sensing.sensors import interpret
from looop_py.workdir import goalfile
from looop_py.workdir import goals as goals_mod
from looop_py.workdir.frontmatter import GoalError, frontmatter
from looop_py.workdir.goals import read_goals, read_playbook
from looop_py.workdir.paths import Paths
from tests.beat.test_decide import Seq
from tests.conftest import invoke_looop, open_wd, write_sensor

DEEP = 300  # orjson parses it, but cannot write it back (its limit is 254 levels)


def _deep_list(n: int) -> str:
    return "[" * n + "]" * n


# -- JSON depth ----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        _deep_list(DEEP),
        _deep_list(3000),  # past orjson's own parse limit
        '{"signal": 1, "detail": ' + _deep_list(DEEP) + "}",  # only in detail
        '{"signal": ' + _deep_list(jsonio.MAX_DEPTH) + "}",  # one level past the cap
    ],
    ids=["signal", "past-orjson", "detail-only", "just-past-cap"],
)
def test_json_nested_too_deep_is_a_too_deep_snapshot(text: str) -> None:
    snap = interpret(text)
    assert snap["signal"] == {"error": "too-deep", "max_depth": jsonio.MAX_DEPTH}
    assert "levels deep" in snap["detail"]["message"]
    jsonio.dumps(snap)  # storable


def test_json_at_the_cap_is_kept() -> None:
    snap = interpret('{"signal": ' + _deep_list(jsonio.MAX_DEPTH - 1) + "}")
    assert not isinstance(snap["signal"], dict)


def test_a_deep_sensor_does_not_stop_the_beat_or_the_other_sensors(wd: Paths) -> None:
    write_sensor(wd, "deep", f"echo '{_deep_list(DEEP)}'")
    write_sensor(wd, "deepdetail", f"""echo '{{"signal": 1, "detail": {_deep_list(DEEP)}}}'""")
    write_sensor(wd, "fine", "echo ok")
    result = beat(open_wd(wd))
    assert result.outcome in ("decided", "skipped")
    by_stem = {r.stem: r.snapshot for r in result.readings}
    assert by_stem["sensor-fine"]["signal"] == "ok"
    for stem in ("sensor-deep", "sensor-deepdetail"):
        assert by_stem[stem]["signal"]["error"] == "too-deep"
        assert json.loads(wd.snapshot(stem).read_text())["signal"]["error"] == "too-deep"
    again = beat(open_wd(wd))
    assert again.outcome == "skipped"  # the error signal is stable: it woke the loop once


def test_read_json_refuses_a_state_file_nested_too_deep(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(_deep_list(DEEP))
    with pytest.raises(CorruptFile, match="levels deep"):
        jsonio.read_json(path)


# -- YAML depth and bombs ------------------------------------------------------

BOMB = (
    "---\ncadence: every 1h\n"
    "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
    "---\n"
)


@pytest.mark.parametrize(
    "text,needle",
    [
        (f"---\nbudget: {_deep_list(5000)}\n---\nbody\n", "levels deep"),
        (f"---\nbudget: {_deep_list(100)}\n---\nbody\n", "levels deep"),
        (
            "---\n" + "".join(f"{' ' * (2 * i)}k{i}:\n" for i in range(300)) + "---\n",
            "deep",
        ),
        (BOMB, "values"),
        ("---\na: &a [*a]\n---\n", "levels deep"),  # a list holding itself
    ],
    ids=["flow-5000", "flow-100", "block-300", "alias-bomb", "self-reference"],
)
def test_frontmatter_too_deep_or_too_big_is_a_goal_error(text: str, needle: str) -> None:
    with pytest.raises(GoalError, match=needle):
        frontmatter(text)


def test_a_deep_goal_is_an_error_naming_it_and_the_beat_goes_on(wd: Paths) -> None:
    wd.goal("deep").write_text(f"---\ncadence: every 1h\nbudget: {_deep_list(5000)}\n---\nx\n")
    wd.goal("bomb").write_text(BOMB)
    result = beat(open_wd(wd))
    assert result.outcome in ("decided", "skipped")
    assert beat(open_wd(wd)).outcome == "skipped"
    out = invoke_looop("-C", str(wd.root), "loops", "--json")
    assert out.returncode == 0, out.stderr
    errors = json.loads(out.stdout)["errors"]
    assert "levels deep" in errors["deep"] and "values" in errors["bomb"]
    out = invoke_looop("-C", str(wd.root), "loops")
    assert out.returncode == 0 and "goals/deep.md" in out.stdout + out.stderr


# -- bounded reads: PLAYBOOK and goals -----------------------------------------


def _hostile(path: Path, kind: str) -> None:
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "huge":
        with path.open("wb") as f:
            f.truncate(goalfile.GOAL_CAP + 1)  # sparse: big, cheap to make
    elif kind == "dangling":
        path.symlink_to(path.parent / "no-such-file")
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    else:
        raise AssertionError(kind)


KINDS = ["directory", "fifo", "dev-zero", "huge", "binary"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_playbook_is_named_in_the_prompt_and_the_beat_goes_on(
    wd: Paths, kind: str
) -> None:
    wd.playbook.unlink()
    _hostile(wd.playbook, kind)
    body = read_playbook(open_wd(wd))
    assert body is not None
    if kind != "binary":
        assert body.startswith(b"(looop could not read PLAYBOOK.md: ")
    result = beat(open_wd(wd), decider=Seq())  # a backend that reads the prompt
    assert result.outcome == "decided", result
    assert beat(open_wd(wd)).outcome == "skipped"  # the notice is stable, so it wakes the loop once
    prompt = max(wd.runs.iterdir()).joinpath("prompt.md").read_text()
    if kind != "binary":
        assert "looop could not read PLAYBOOK.md" in prompt


@pytest.mark.parametrize("kind", [*KINDS, "dangling"])
def test_a_hostile_goal_is_an_error_naming_it_and_the_others_are_read(wd: Paths, kind: str) -> None:
    wd.goal("fine").write_text("# a fine goal\n")
    _hostile(wd.goals / "bad.md", kind)
    found = {g.id: g for g in read_goals(open_wd(wd))}
    assert found["fine"].error is None and found["fine"].body == b"# a fine goal\n"
    if kind == "dangling":
        assert "bad" not in found  # nothing there: no goal
    elif kind != "binary":
        assert found["bad"].error and "goals/bad.md" in found["bad"].body.decode()
    assert beat(open_wd(wd)).outcome == "decided"
    assert beat(open_wd(wd)).outcome == "skipped"
    out = invoke_looop("-C", str(wd.root), "loops")
    assert out.returncode == 0, out.stderr
    assert invoke_looop("-C", str(wd.root), "status").returncode == 0


def test_goals_together_are_capped(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(goals_mod, "GOALS_TOTAL_CAP", 3000)
    for old in wd.goals.glob("*.md"):
        old.unlink()
    for i in range(5):
        wd.goal(f"g{i}").write_text("x" * 1000)
    found = read_goals(open_wd(wd))
    ok = [g.id for g in found if g.error is None]
    over = [g for g in found if g.error]
    assert len(ok) == 3 and len(over) == 2
    assert all("together" in (g.error or "") for g in over)


def test_read_bounded_never_reads_past_its_cap(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_bytes(b"x" * 10)
    assert jsonio.read_bounded(small, 10) == b"x" * 10
    with pytest.raises(CorruptFile, match="larger than the 9 bytes cap"):
        jsonio.read_bounded(small, 9)
    with pytest.raises(CorruptFile, match="a character device"):
        jsonio.read_bounded(Path("/dev/zero"), 1 << 20)
    with pytest.raises(FileNotFoundError):
        jsonio.read_bounded(tmp_path / "missing", 10)
    with pytest.raises(FileNotFoundError):
        jsonio.read_bounded(small / "under-a-file", 10)


@pytest.mark.slow
def test_a_pulse_against_a_dev_zero_playbook_stays_small(wd: Paths) -> None:
    """The issue's OOM: PLAYBOOK.md linked to /dev/zero. Peak RSS of the pulse process."""
    wd.playbook.unlink()
    wd.playbook.symlink_to("/dev/zero")
    wd.goal("zero").symlink_to("/dev/zero")
    probe = (
        "import resource, subprocess, sys;"
        f"r = subprocess.run([sys.executable, '-m', 'looop_py', '-C', {str(wd.root)!r}, 'pulse'],"
        " capture_output=True);"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    out = run_looop_python(probe)
    rc, peak_kb = (int(x) for x in out.split())
    assert rc == 0
    assert peak_kb < 100 * 1024, f"peak RSS {peak_kb} KiB"


def run_looop_python(code: str) -> str:
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    ).stdout


def test_looop_toml_that_is_not_a_small_regular_file_is_exit_2(wd: Paths) -> None:
    wd.config.write_text("# " + "x" * (1024 * 1024) + "\n")
    out = invoke_looop("-C", str(wd.root), "pulse")
    assert out.returncode == 2 and "cap" in out.stderr
    wd.config.unlink()
    wd.config.symlink_to("/dev/zero")
    out = invoke_looop("-C", str(wd.root), "pulse")
    assert out.returncode == 2, out.stderr
