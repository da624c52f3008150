"""The hostile corpus (issue 10): every command exits 0..4 with a readable message, never 70,
and the next clean beat succeeds.

Sensors, goals and PLAYBOOK here; every looop.toml key x bad values is in
workdir/test_config_bounds.py, every state file x three corruptions in
beat/test_state_corruption.py. Property-based parts (Hypothesis) cover sensor
output, goal frontmatter and looop.toml tables.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looop_py import jsonio
from looop_py.errors import ConfigError, LooopError
from looop_py.sensing.sensors import RawRun, interpret, normalize
from looop_py.workdir import bounds
from looop_py.workdir import config as config_mod
from looop_py.workdir.frontmatter import frontmatter
from looop_py.workdir.goalfile import GOAL_CAP
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, wait_for, write_sensor


def _deep(signal: Any) -> bool:
    return isinstance(signal, dict) and signal.get("error") == "too-deep"


# name -> (script, what its snapshot's signal must be: a predicate)
SENSORS: dict[str, tuple[str, Any]] = {
    "binary": ("head -c 4096 /dev/urandom", lambda s: s == {"error": "not-utf8"}),
    "not-utf8": (r'printf "\xff\xfe ok"', lambda s: s == {"error": "not-utf8"}),
    "gigabyte-line": (
        "yes | head -c 1000000000",
        lambda s: s == {"error": "too-large", "cap": 8192},
    ),
    "endless": ("# looop:timeout=1\nyes", lambda s: s == {"error": True, "exit_code": 124}),
    "term-ignoring": (
        "# looop:timeout=1\ntrap '' TERM INT HUP; while :; do sleep 0.05; done",
        lambda s: s == {"error": True, "exit_code": 124},
    ),
    "setsid-daemons": (
        'for i in 1 2 3; do (setsid bash -c \'echo $$ >> "$0"; exec sleep 999\' "$PWD/pids" &); '
        "done; echo started",
        lambda s: s == "started",
    ),
    "fork-fan-out": (
        "for i in $(seq 40); do (sleep 999 &); (setsid bash -c 'echo $$ >> \"$0\"; sleep 999' "
        '"$PWD/pids" > /dev/null 2>&1 &); done; echo fanned',
        lambda s: s == "fanned",
    ),
    "deep-json": ('printf "%0.s[" $(seq 300); printf "%0.s]" $(seq 300)', _deep),
    "deep-detail": (
        'printf \'{"signal":1,"detail":\'; printf "%0.s[" $(seq 300); printf "%0.s]" $(seq 300);'
        " echo '}'",
        _deep,
    ),
    "nan": ('echo \'{"signal": NaN, "detail": {}}\'', lambda s: isinstance(s, str)),
    "infinity": ("echo '{\"signal\": 1e999999}'", lambda s: isinstance(s, str)),
    "huge-int": (
        "echo '{\"signal\": 123456789012345678901234567890}'",
        lambda s: s == {"error": "number-out-of-range"},
    ),
    "duplicate-keys": ('echo \'{"signal": 1, "signal": 2}\'', lambda s: s == 2),
    "stderr-flood": ("head -c 20000000 /dev/zero >&2; echo ok", lambda s: s == "ok"),
    "exits-1": ("exit 1", lambda s: s == {"error": True, "exit_code": 1}),
    "no-shebang": ("", None),  # written without #!: run by bash
}


def _hostile_goals(goals: Path) -> None:
    deep = "[" * 5000 + "]" * 5000
    (goals / "deep-yaml.md").write_text(f"---\ncadence: every 1h\nbudget: {deep}\n---\n")
    (goals / "yaml-bomb.md").write_text(
        "---\nlevel: L1\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
            for p, n in zip("abcdefg", "bcdefgh", strict=True)
        )
        + "---\n"
    )
    (goals / "python-tag.md").write_text("---\nlevel: !!python/object:os.system ls\n---\n")
    (goals / "binary.md").write_bytes(bytes(range(256)) * 64)
    with (goals / "huge.md").open("wb") as f:
        f.truncate(GOAL_CAP * 3)
    (goals / "dir.md").mkdir()
    os.mkfifo(goals / "fifo.md")
    (goals / "zero.md").symlink_to("/dev/zero")
    (goals / "dangling.md").symlink_to(goals / "nowhere")
    (goals / "loop-a.md").symlink_to(goals / "loop-b.md")
    (goals / "loop-b.md").symlink_to(goals / "loop-a.md")
    (goals / "unclosed.md").write_text("---\nlevel: L1\nnever closed\n")


COMMANDS = [
    ["pulse"],
    ["pulse", "--force", "--json"],
    ["sense", "--json"],
    ["status"],
    ["status", "--json"],
    ["why"],
    ["loops"],
    ["loops", "--json"],
    ["rounds", "--all"],
    ["workers", "--all"],
    ["claims"],
    ["asks"],
    ["journal"],
    ["schedules"],
    ["doctor", "--offline"],
    ["prune"],
]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _peak_rss_kib(root: Path) -> tuple[int, int]:
    """(exit code, peak RSS in KiB) of one `looop pulse` in a fresh child."""
    code = (
        "import resource, subprocess, sys;"
        "r = subprocess.run([sys.executable, '-m', 'looop_py', '-C', sys.argv[1], 'pulse'],"
        " capture_output=True);"
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(root)], env=env, capture_output=True, text=True
    )
    rc, peak = out.stdout.split()
    return int(rc), int(peak)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_hostile_corpus_never_crashes_and_the_next_clean_beat_succeeds(wd: Paths) -> None:
    for name, (script, _) in SENSORS.items():
        if name == "no-shebang":
            path = wd.sensors / f"{name}.sh"
            path.write_text('echo "{\\"signal\\": \\"no shebang\\"}"\n')
            path.chmod(0o755)
        else:
            write_sensor(wd, name, script)
    _hostile_goals(wd.goals)
    wd.playbook.unlink()
    wd.playbook.symlink_to("/dev/zero")

    rc, peak = _peak_rss_kib(wd.root)
    assert rc == 0 and peak < 100 * 1024, (rc, peak)
    for args in COMMANDS:
        out = invoke_looop("-C", str(wd.root), *args)
        assert 0 <= out.returncode <= 4, (args, out.returncode, out.stderr[-2000:])
        assert "Traceback" not in out.stdout + out.stderr, args
        assert "internal error" not in out.stderr, (args, out.stderr)
    assert not wd.error_log.exists(), wd.error_log.read_text()[-3000:]

    snaps = {
        p.name.removeprefix("sensor-").removesuffix(".json"): json.loads(p.read_text())
        for p in wd.snapshots.glob("sensor-*.json")
    }
    for name, (_, ok) in SENSORS.items():
        if ok is not None:
            assert ok(snaps[name]["signal"]), (name, snaps[name])
    assert snaps["no-shebang"]["signal"] == "no shebang"
    pids = [int(x) for x in (wd.root / "pids").read_text().split()]
    wait_for(
        lambda: not any(_alive(p) for p in pids),
        5,
        lambda: f"a sensor's daemon outlived the beat: {[p for p in pids if _alive(p)]}",
        interval=0.05,
    )

    loops = json.loads(invoke_looop("-C", str(wd.root), "loops", "--json").stdout)
    for goal in ("deep-yaml", "yaml-bomb", "huge", "dir", "fifo", "zero"):
        assert goal in loops["errors"], (goal, loops["errors"])

    # Clean up by hand, as a user would: the next beat is clean and succeeds.
    for p in wd.sensors.iterdir():
        p.unlink()
    for p in wd.goals.glob("*.md"):
        p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
    wd.playbook.unlink()
    wd.playbook.write_text("# Playbook\n")
    write_sensor(wd, "fine", "echo fine")
    out = invoke_looop("-C", str(wd.root), "pulse", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["outcome"] == "decided" and result["sensors"]["fine"]["status"] == "ok"
    assert not result.get("failed_steps")


@pytest.mark.parametrize("kind", ["directory", "fifo", "dev-zero", "huge", "binary", "loop"])
def test_every_hostile_playbook_pulse_exits_0(wd: Paths, kind: str) -> None:
    wd.playbook.unlink()
    if kind == "directory":
        wd.playbook.mkdir()
    elif kind == "fifo":
        os.mkfifo(wd.playbook)
    elif kind == "dev-zero":
        wd.playbook.symlink_to("/dev/zero")
    elif kind == "huge":
        with wd.playbook.open("wb") as f:
            f.truncate(64 * 1024 * 1024)
    elif kind == "binary":
        wd.playbook.write_bytes(os.urandom(4096))
    else:
        wd.playbook.symlink_to(wd.playbook)
    out = invoke_looop("-C", str(wd.root), "pulse", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["outcome"] == "decided"


# -- property-based: sensor output, frontmatter, looop.toml ---------------------------------

# Same examples on every run (CI never flakes on a new draw), no example database on disk.
SETTINGS: dict[str, Any] = {"deadline": None, "derandomize": True, "database": None}

JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
JSON = st.recursive(
    JSON_LEAVES,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4)
    ),
    max_leaves=40,
)


def _dump(value: Any) -> str:
    return json.dumps(value)  # the stdlib writes NaN, Infinity and big ints, as hostile as it gets


def _nest(value: Any, depth: int, as_dict: bool) -> Any:
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


def _check_snapshot(snap: Any) -> None:
    assert isinstance(snap, dict) and "signal" in snap and "detail" in snap
    jsonio.dumps(snap)  # storable
    jsonio.canonical(snap["signal"])  # hashable


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], **SETTINGS)
@given(value=JSON, depth=st.integers(0, 400), as_dict=st.booleans(), wrap=st.booleans())
def test_any_json_a_sensor_prints_becomes_a_storable_snapshot(
    value: Any, depth: int, as_dict: bool, wrap: bool
) -> None:
    doc = _nest(value, depth, as_dict)
    if wrap:
        doc = {"signal": 1, "detail": doc}
    snap = interpret(_dump(doc))
    _check_snapshot(snap)
    try:
        json.dumps(doc, allow_nan=False)
    except ValueError:
        return  # NaN or Infinity: not JSON to orjson, so the output is kept as plain text
    if depth > jsonio.MAX_DEPTH:
        assert snap["signal"]["error"] == "too-deep"


@settings(max_examples=200, **SETTINGS)
@given(data=st.binary(max_size=600) | st.text(max_size=300).map(str.encode))
def test_any_bytes_a_sensor_prints_become_a_storable_snapshot(data: bytes) -> None:
    raw = RawRun(0, data, len(data), b"")
    _check_snapshot(normalize(raw, cap=8192, timeout_s=5))


YAML_PIECES = st.sampled_from(
    [
        "[", "]", "{", "}", ": ", "- ", "\n", "  ", "&a ", "*a", "&b ", "*b", "!!str ",
        "!!python/object:os.system ", "'", '"', "key", "on", "cadence: every 1h", "level: L1",
        "? ", ", ", "|\n  x", "---", "...", "%YAML 1.1\n", "<<: *a", "!!binary aGk=", "~",
        "1e999", ".nan", "0x1F", "2026-11-22",
    ]
)  # fmt: skip


@settings(max_examples=300, **SETTINGS)
@given(pieces=st.lists(YAML_PIECES, max_size=60), deep=st.integers(0, 3000))
def test_any_frontmatter_is_a_mapping_or_a_goal_error(pieces: list[str], deep: int) -> None:
    head = "".join(pieces) + "[" * deep + "]" * deep
    try:
        meta, _ = frontmatter(f"---\n{head}\n---\nbody\n")
    except LooopError:
        return
    assert isinstance(meta, dict)
    assert jsonio.shape_problem(meta) is None


CONFIG_VALUES = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**45),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=10),
    st.lists(st.integers(), max_size=2),
)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


@settings(max_examples=300, **SETTINGS)
@given(
    picks=st.dictionaries(st.sampled_from(sorted(bounds.RANGES)), CONFIG_VALUES, max_size=6),
)
def test_any_looop_toml_loads_in_range_or_is_a_config_error(
    tmp_path_factory: pytest.TempPathFactory, picks: dict[str, Any]
) -> None:
    sections: dict[str, list[str]] = {}
    for key, value in picks.items():
        section, name = key.split(".")
        sections.setdefault(section, []).append(f"{name} = {_toml_value(value)}")
    text = "".join(f"[{s}]\n" + "\n".join(lines) + "\n" for s, lines in sections.items())
    path = tmp_path_factory.mktemp("toml") / "looop.toml"
    path.write_text(text)
    try:
        cfg = config_mod.load(path)
    except ConfigError as exc:
        assert str(path) in exc.message
        return
    bounds.check(cfg)  # what loads is in range
    for key in picks:
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        assert value is None or not isinstance(value, float) or math.isfinite(value)
