"""The quiet beat: a seal from the last full beat proves nothing changed (beat/quiet.py).

The hostile question first: can the seal ever vouch for a world that changed?
Every test here runs the CLI through its own door (console.main, as `looop pulse`
starts: the quiet beat first, the full one when the seal does not hold), mutates
the work dir the way a user, a worker or a model would, and checks that the beat
that follows saw the change exactly as a full beat does (`looop sense` is the
oracle). The door runs in this process; what only a fresh process shows (what the
quiet beat imports, its line on a terminal) is checked in a child.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.beat import quiet
from looop_py.sensing import probes, seal, survey
from looop_py.sensing.sense import Committed
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for, write_sensor
from tests.coord.test_etcdseal import ETCD_QUIET_MODULES


def _events(wd: Paths) -> list[dict[str, object]]:
    return [json.loads(line) for line in wd.events.read_text().splitlines()]


def _last_beat(wd: Paths) -> dict[str, object]:
    return next(e for e in reversed(_events(wd)) if e["event"] == "beat")


def _pulse(wd: Paths, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = invoke_looop("-C", str(wd.root), "pulse", *args, env=env)
    assert done.returncode == 0, done.stderr
    return _last_beat(wd)


def _sensed_hash(wd: Paths, env: dict[str, str] | None = None) -> str:
    done = invoke_looop("-C", str(wd.root), "sense", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["world_hash"])


def _quiet_wd(wd: Paths) -> Paths:
    """Three sensors (one reads a file we change), two goals, a committed world, a seal."""
    (wd.root / "value").write_text("1\n")
    write_sensor(wd, "reads", 'echo "{\\"signal\\": $(cat value)}"')
    write_sensor(wd, "chatty", "echo steady; date +%N >&2")  # stderr on success is not read
    write_sensor(wd, "fails", "echo broken >&2; exit 3")
    (wd.goals / "alpha.md").write_text("# Alpha\n\nkeep it up\n")
    (wd.goals / "beta.md").write_text("# Beta\n\nkeep it going\n")
    first = _pulse(wd, "--force")
    assert first["outcome"] == "decided"
    assert (wd.root / seal.SEAL).exists(), "a committed beat leaves a seal"
    return wd


# -- the names the quiet path spells without pathlib -------------------------------


def test_the_seal_names_the_files_paths_names(wd: Paths) -> None:
    listed = {k: v for k, v in survey.LISTED.items() if k != "rounds_done"}
    assert wd.sessions == wd.root / survey.SESSIONS
    for attr, rel in {**survey.FILES, **survey.NO_ENTRIES, **survey.EMPTY, **listed}.items():
        assert getattr(wd, attr) == wd.root / rel, attr
    assert wd.rounds == wd.root / survey.ROUNDS
    assert wd.rounds / "done" == wd.root / survey.LISTED["rounds_done"]
    assert wd.events == wd.root / quiet.EVENTS
    assert wd.pulse_lock == wd.root / quiet.PULSE_LOCK
    assert wd.flap == wd.root / quiet.FLAP


def test_quiet_probe_values_are_what_the_probes_say_of_an_empty_work_dir(wd: Paths) -> None:
    found, _ = probes.run_probes(open_wd(wd), 1_700_000_000.0, goals=[], persist=False)
    said = {f"snap:{stem}": jsonio.canonical(snap["signal"]).decode() for stem, snap in found}
    assert said == seal.QUIET_PROBES


_OLD_HEADER = re.compile(rb"^\s*#\s*looop:(timeout|interval)\s*=\s*(\d+(?:\.\d+)?)\s*$")


def _old_parse(head: bytes) -> dict[str, float]:
    found = {}
    for line in head.splitlines()[:20]:
        m = _OLD_HEADER.match(line)
        if m:
            found[m.group(1).decode()] = float(m.group(2))
    return found


def test_the_header_parser_reads_what_the_regex_read() -> None:
    cases = [
        b"# looop:timeout=5",
        b"  #looop:interval = 2.5  ",
        b"# looop: timeout=5",
        b"# looop:timeout=5s",
        b"# looop:timeout=.5",
        b"# looop:timeout=5.",
        b"# looop:timeout=1.2.3",
        b"## looop:timeout=5",
        b"# looop:interval=\t60\t",
        b"x # looop:timeout=5",
        b"# looop:timeouts=5",
        b"# looop:timeout==5",
        b"# looop:timeout=-5",
    ]
    rng = random.Random(7)
    alphabet = b" \t#lopt:imeunrva=0123456789.x"
    cases += [bytes(rng.choice(alphabet) for _ in range(rng.randrange(30))) for _ in range(3000)]
    cases += [b"# looop:" + bytes(rng.choice(alphabet) for _ in range(12)) for _ in range(3000)]
    for case in cases:
        assert seal.parse_header(case) == _old_parse(case), case
    many = b"\n".join(cases[:40])
    assert seal.parse_header(many) == _old_parse(many)


# -- the quiet beat itself ---------------------------------------------------------


def test_an_unchanged_world_is_skipped_from_the_seal_without_parsing(wd: Paths) -> None:
    _quiet_wd(wd)
    beat = _pulse(wd)
    assert beat["outcome"] == "skipped" and beat.get("sealed") is True
    assert beat["world_hash"] == beat["prev_hash"] == _sensed_hash(wd)
    # The failing sensor is named as a full beat names it; the steady ones are counted.
    assert beat["sensors"] == {
        "fails": {"status": "failed", "ms": beat["sensors"]["fails"]["ms"], "error": 3}
    }  # type: ignore[index]
    assert beat["sensors_steady"] == 2
    full = _pulse(wd, "-v")  # -v takes the full path: the same event, field for field
    assert full.get("sealed") is None and full["outcome"] == "skipped"
    assert set(full) | {"sealed"} == set(beat)
    assert {k: v for k, v in full.items() if k not in ("ts", "ms", "sensors")} == {
        k: v for k, v in beat.items() if k not in ("ts", "ms", "sensors", "sealed")
    }
    assert set(full["sensors"]) == {"fails"}  # type: ignore[arg-type]


def _child_pulse(wd: Paths, report: str) -> str:
    """Code for a child interpreter that runs `looop pulse` through its own door (os._exit
    turned into SystemExit, so the child lives on) and then prints `report`."""
    return (
        "import os, sys\n"
        "before = set(sys.modules)  # an editable install's finder loads pathlib at start-up\n"
        "def stay(code):\n"
        "    raise SystemExit(code)\n"
        "os._exit = stay\n"
        f"sys.argv = [sys.argv[0], '-C', {str(wd.root)!r}, 'pulse']\n"
        "from looop_py.console import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"{report}\n"
    )


def test_a_quiet_beat_loads_no_json_no_pathlib_no_subprocess(wd: Paths) -> None:
    _quiet_wd(wd)
    _pulse(wd)  # the seal now vouches for the child's own interpreter and argv
    heavy = ("orjson", "json", "pathlib", "subprocess", "dataclasses", "enum", "typing")
    heavy += ("looop_py.beat.pulse", "looop_py.sensing.sensors", "looop_py.jsonio", "yaml")
    code = _child_pulse(
        wd, f"print('HEAVY', [m for m in {heavy!r} if m in set(sys.modules) - before])"
    )
    for _ in range(2):  # the first run seals for this interpreter and argv, the second is quiet
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr
    assert _last_beat(wd).get("sealed") is True


def test_a_changed_sensor_runs_once_and_the_full_beat_decides(wd: Paths) -> None:
    _quiet_wd(wd)
    write_sensor(wd, "counted", 'echo x >> runs.log; echo "{\\"signal\\": $(cat value)}"')
    _pulse(wd)
    _pulse(wd)
    runs = (wd.root / "runs.log").read_text().count("x")
    (wd.root / "value").write_text("2\n")
    beat = _pulse(wd)
    assert beat["outcome"] == "decided" and not beat.get("sealed")
    assert (wd.root / "runs.log").read_text().count("x") == runs + 1, "one run per beat"
    assert beat["world_hash"] == _sensed_hash(wd)
    assert _pulse(wd).get("sealed") is True  # and the decided beat sealed the new world


def _put(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


MUTATIONS = {
    "goal edit, same size": lambda wd: (wd.goals / "alpha.md").write_text(
        "# Alpha\n\nkeep it UP\n"
    ),
    "goal added": lambda wd: (wd.goals / "gamma.md").write_text("# Gamma\n"),
    "goal removed": lambda wd: (wd.goals / "beta.md").unlink(),
    "playbook edit": lambda wd: wd.playbook.write_text(wd.playbook.read_text() + "\nmore\n"),
    "sensor output": lambda wd: (wd.root / "value").write_text("7\n"),
    "sensor added": lambda wd: write_sensor(wd, "new", "echo 1"),
    "sensor removed": lambda wd: (wd.sensors / "chatty.sh").unlink(),
    "sensor fixed": lambda wd: write_sensor(wd, "fails", "echo fine"),
    "sensor exit code": lambda wd: write_sensor(wd, "fails", "echo broken >&2; exit 4"),
    "sensor stderr on failure": lambda wd: write_sensor(wd, "fails", "echo other >&2; exit 3"),
    "timeout header": lambda wd: write_sensor(
        wd, "reads", '# looop:timeout=7\necho "{\\"signal\\": $(cat value)}"'
    ),
    "a worker appears": lambda wd: (wd.sessions / "w1").mkdir(parents=True),
    "a claim file": lambda wd: _put(wd.claims / "repo.json", "{}"),
    "an ask": lambda wd: _put(wd.asks / "a1.json", "{}"),
    "an answer": lambda wd: _put(wd.answers / "a1.json", "{}"),
    "a timer": lambda wd: _put(wd.timers / "t.json", "{}"),
    "a round": lambda wd: (wd.rounds / "r1").mkdir(parents=True),
    "an approval": lambda wd: _put(wd.approved / "x.json", "{}"),
    "config edit": lambda wd: wd.config.write_text(wd.config.read_text() + "\n# a comment\n"),
    "committed world rewritten": lambda wd: wd.last_world.write_text(wd.last_world.read_text()),
    "a loop goal": lambda wd: (wd.goals / "lp.md").write_text(
        "---\nloop:\n  pattern: self-check\n  maker: echo hi\n  runtime: shell\n---\n# Loop\n"
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_no_mutation_slips_past_the_seal(wd: Paths, name: str) -> None:
    _quiet_wd(wd)
    assert _pulse(wd).get("sealed") is True
    MUTATIONS[name](wd)
    beat = _pulse(wd)
    assert not beat.get("sealed"), f"{name}: the seal vouched for a changed work dir"
    assert beat["world_hash"] == _sensed_hash(wd)


def test_stderr_of_a_succeeding_sensor_and_unrelated_files_keep_it_quiet(wd: Paths) -> None:
    _quiet_wd(wd)
    _pulse(wd)
    (wd.root / "notes.txt").write_text("a human's scratch file\n")
    (wd.claims / ".locks").mkdir(parents=True, exist_ok=True)  # dotfiles never count
    for _ in range(3):
        beat = _pulse(wd)
        assert beat.get("sealed") is True, beat


def test_a_random_walk_never_disagrees_with_a_full_sense(wd: Paths) -> None:
    """Whatever the order of changes, a sealed skip means `looop sense` sees no change."""
    _quiet_wd(wd)
    rng = random.Random(11)
    steps = [
        lambda: (wd.root / "value").write_text(f"{rng.randrange(3)}\n"),
        lambda: (wd.goals / "alpha.md").write_text(f"# Alpha\n\nround {rng.randrange(3)}\n"),
        lambda: write_sensor(wd, "fails", f"echo x >&2; exit {rng.choice([0, 3])}"),
        lambda: None,
        lambda: None,
    ]
    sealed = 0
    for _ in range(24):
        rng.choice(steps)()
        beat = _pulse(wd)
        sensed = _sensed_hash(wd)
        assert beat["world_hash"] == sensed
        if beat.get("sealed"):
            sealed += 1
            assert beat["prev_hash"] == sensed
    assert sealed >= 4


def test_a_damaged_seal_means_a_full_beat_that_writes_a_good_one(wd: Paths) -> None:
    _quiet_wd(wd)
    path = wd.root / seal.SEAL
    good = path.read_text()
    for bad in (
        "",
        "garbage",
        good.replace(seal.FORMAT, "looop-quiet-seal 0 0"),
        good[: len(good) // 2],
        good.replace("sensor ", "sensr "),
        "\x00\xff" * 9,
    ):
        path.write_text(bad, errors="surrogateescape")
        beat = _pulse(wd)
        assert beat["outcome"] == "skipped" and not beat.get("sealed"), bad[:40]
        assert path.read_text() != bad
        assert _pulse(wd).get("sealed") is True


def test_the_seal_expires_when_a_decision_is_due(wd: Paths) -> None:
    _quiet_wd(wd)
    path = wd.root / seal.SEAL
    text = path.read_text()
    path.write_text(re.sub(r"^until .*$", "until 1.0", text, flags=re.M))
    assert not _pulse(wd).get("sealed")
    assert seal._until(Committed("h", {}, 100.0, "noop", None), 60) == 160.0
    assert seal._until(Committed("h", {}, 100.0, "noop", 130.0), 60) == 130.0
    assert seal._until(Committed("h", {}, 100.0, "noop", None), 0) == float("inf")
    assert seal._until(Committed("h", {}, 100.0, "start_worker", None), 60) == float("inf")


def test_a_held_lock_is_reported_as_locked(wd: Paths) -> None:
    _quiet_wd(wd)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl,sys,time; f=open(sys.argv[1],'w');"
            "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)",
            str(wd.pulse_lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        beat = _pulse(wd)
        assert beat["outcome"] == "locked"
    finally:
        holder.kill()
        holder.wait()
    assert _pulse(wd).get("sealed") is True


def test_secrets_stay_out_of_sensors_on_the_quiet_path_too(wd: Paths) -> None:
    _quiet_wd(wd)
    write_sensor(wd, "env", 'echo "{\\"signal\\": \\"${FOO_API_KEY:-unset}\\"}"')
    env = {"FOO_API_KEY": "sk-very-secret"}
    _pulse(wd, env=env)
    beat = _pulse(wd, env=env)
    assert beat.get("sealed") is True
    snap = json.loads((wd.snapshots / "sensor-env.json").read_text())
    assert snap["signal"] == "unset"


def test_an_interval_sensor_is_reused_until_due(wd: Paths) -> None:
    _quiet_wd(wd)
    write_sensor(wd, "slow", "# looop:interval=3600\necho x >> slow.log; echo 1")
    _pulse(wd)
    _pulse(wd)
    for _ in range(3):
        assert _pulse(wd).get("sealed") is True
    assert (wd.root / "slow.log").read_text().count("x") == 1


def test_a_quiet_beat_prints_the_beat_line_on_a_terminal(wd: Paths) -> None:
    _quiet_wd(wd)
    _pulse(wd)
    done = subprocess.run(
        ["script", "-qec", f"{sys.executable} -m looop_py -C {wd.root} pulse", "/dev/null"],
        capture_output=True,
        text=True,
        env={**os.environ, "LOOOP_DIR": ""},
    )
    if done.returncode == 127 or "not found" in done.stderr:
        pytest.skip("script(1) is not installed")
    assert re.search(
        r"· skipped: world unchanged \(xxh3:\w{12}…\), 2/3 sensors ok \(failed: fails\), \d+ ms",
        done.stdout,
    ), done.stdout
    assert done.returncode == 0


def test_a_quiet_beat_that_breaks_falls_back_to_a_full_one(wd: Paths) -> None:
    _quiet_wd(wd)
    _pulse(wd)
    wd.events.unlink()
    wd.events.mkdir()  # the quiet beat cannot append its event: the full beat reports it
    done = invoke_looop("-C", str(wd.root), "pulse")
    wd.events.rmdir()
    assert done.returncode in (0, 1, 70), done
    assert _pulse(wd)["outcome"] in ("skipped", "decided")


def test_seal_refuses_what_it_cannot_vouch_for(wd: Paths) -> None:
    _quiet_wd(wd)
    (wd.claims / "repo.json").parent.mkdir(parents=True, exist_ok=True)
    (wd.claims / "repo.json").write_text("{}")
    _pulse(wd)
    assert not (wd.root / seal.SEAL).exists()
    shutil.rmtree(wd.claims)
    _pulse(wd)
    assert (wd.root / seal.SEAL).exists()
    Path(wd.config).write_text(wd.config.read_text() + '\n[notify]\ncommand = "true"\n')
    _pulse(wd)
    assert not (wd.root / seal.SEAL).exists(), "a notify hook needs the full beat"


LOOP = """---
intent: sweep the repo
level: L1-report
cadence: daily 03:00
runtime: shell
maker: |
  echo looking; "$LOOOP_BIN" done --summary "found 2 things"
checker: |
  "$LOOOP_BIN" done --summary "both are real"
---
# sweep
"""


def test_a_loop_with_a_cadence_is_sealed_until_its_next_slot(wd: Paths) -> None:
    _quiet_wd(wd)
    wd.config.write_text(wd.config.read_text() + "\n[limits]\nnoop_ttl_s = 0\n")
    (wd.goals / "sweep.md").write_text(LOOP)
    _pulse(wd)
    _pulse(wd)
    assert _pulse(wd).get("sealed") is True
    found = re.search(r"^until (.*)$", (wd.root / seal.SEAL).read_text(), re.M)
    until = float(found[1]) if found else 0.0
    book = json.loads(wd.loop_schedule.read_text())
    assert until == min(entry["next_at"] for entry in book["loops"].values())
    assert until < float("inf")


def test_archived_rounds_are_one_history_line_that_a_rewrite_moves(wd: Paths) -> None:
    """Archived rounds are written by rename (a new inode), never in place: the seal keeps
    them by name and inode (tests/beat/test_quiet_history.py has the rest)."""
    _quiet_wd(wd)
    done = wd.rounds / "done"
    done.mkdir(parents=True)
    record = {"id": "sweep-1", "loop": "sweep", "phase": "done", "started_at": 1.0}
    (done / "sweep-1.json").write_text(json.dumps(record))
    _pulse(wd)
    assert _pulse(wd).get("sealed") is True
    (done / ".sweep-1.tmp").write_text(json.dumps({**record, "phase": "DONE"}))
    os.replace(done / ".sweep-1.tmp", done / "sweep-1.json")
    beat = _pulse(wd)
    assert not beat.get("sealed")
    assert beat["world_hash"] == _sensed_hash(wd)


def test_an_ended_worker_is_sealed_until_it_is_pruned(wd: Paths, tmp_path: Path) -> None:
    """A settled session is inert files: sealed (surveyed file by file) until its prune
    time. While it runs it is sealed by its process (test_quiet_worker.py); once it ends,
    beats are full ones until a beat settles it."""
    _quiet_wd(wd)
    release = tmp_path / "release"  # the worker runs until the test says so
    script = f"while [ ! -e {release} ]; do sleep 0.05; done; echo done"
    done = invoke_looop("-C", str(wd.root), "worker", "start", "w1", "--runtime", "shell", script)
    assert done.returncode == 0, done.stderr
    beat = _pulse(wd)  # it runs: whether this beat was quiet or not, it saw the worker
    assert beat["world_hash"] == _sensed_hash(wd)
    release.touch()

    def status_text() -> str:
        return (wd.sessions / "w1" / "status.json").read_text()

    def sealed() -> bool:  # it ends; a beat settles it, then seals it ended
        found = seal.read(str(wd.root))
        if found is not None and not found.outputs and "finalized_at" in status_text():
            return True
        _pulse(wd)
        return False

    wait_for(sealed, 20, lambda: f"a seal; the last beat: {_last_beat(wd)}", interval=0.2)
    beat = _pulse(wd)
    assert beat.get("sealed") is True and beat["world_hash"] == _sensed_hash(wd)
    status = json.loads((wd.sessions / "w1" / "status.json").read_text())
    found = re.search(r"^until (.*)$", (wd.root / seal.SEAL).read_text(), re.M)
    assert found and float(found[1]) <= status["ended_at"] + 259200.0
    # A human's `looop tell` to the ended worker, or its record edited: a full beat again.
    (wd.sessions / "w1" / "result.json").write_text('{"status": "blocked"}')
    beat = _pulse(wd)
    assert not beat.get("sealed") and beat["world_hash"] == _sensed_hash(wd)


def test_a_forged_seal_runs_nothing_outside_sensors(wd: Paths, tmp_path: Path) -> None:
    """Whoever writes state/quiet-seal can name only scripts the survey saw in sensors/."""
    _quiet_wd(wd)
    evil = tmp_path / "evil.sh"
    evil.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\n")
    evil.chmod(0o755)
    path = wd.root / seal.SEAL
    text = path.read_text()
    rel = os.path.relpath(tmp_path / "evil", wd.sensors)
    path.write_text(text.replace("sensor reads ", f"sensor {rel} ", 1))
    beat = _pulse(wd)
    assert not beat.get("sealed") and not (tmp_path / "ran").exists()


def test_the_typing_free_idiom_stays_where_start_up_pays(wd: Paths) -> None:
    """`TYPE_CHECKING = False` only in modules a process loads before typing is loaded.

    Three starts are bound by their cost: the sealed quiet beat, a worker's supervisor
    and the loop engine imported as a library. Everywhere else typing is loaded already
    (the WorkDir's dataclasses), so the idiom saves nothing and `from typing import
    TYPE_CHECKING` reads plainer.
    """
    _churning_wd(wd)  # the quiet beat parses a churning sensor's output too
    report = (
        "print('MODS', sorted(m for m in sys.modules if m.startswith('looop_py')))\n"
        "print('TYPING', 'typing' in sys.modules)"
    )
    quiet_beat = _child_pulse(wd, report)
    bound: set[str] = set()
    # The first child seals for its own interpreter and argv; the second beat is quiet.
    subprocess.run([sys.executable, "-c", quiet_beat], capture_output=True)
    supervisor = f"import sys, looop_py.workers.supervisor\n{report}\n"
    engine = (
        "import sys, looop_py.engine.rounds, looop_py.engine.loop, looop_py.engine.scheduler\n"
        f"{report}\n"
    )
    bound |= ETCD_QUIET_MODULES  # the quiet beat on etcd: tests/coord/test_etcdseal.py
    for code in (quiet_beat, supervisor, engine):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert "TYPING False" in done.stdout, done.stdout + done.stderr
        bound |= set(ast.literal_eval(done.stdout.split("MODS ", 1)[1].splitlines()[0]))
    package = Path(quiet.__file__).parents[1]
    using = {
        ".".join(p.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in package.rglob("*.py")
        if "TYPE_CHECKING = False" in p.read_text()
    }
    assert using, "the quiet path keeps its idiom"
    assert using <= bound, f"import TYPE_CHECKING from typing in: {sorted(using - bound)}"


# -- a churning detail under a steady signal ------------------------------------------

CHURN = 'printf \'{"signal": {"n": 1}, "detail": {"at": %s}}\' "$(date +%s%N)"'


def _churning_wd(wd: Paths) -> Paths:
    """The quiet work dir plus a sensor printing `out` if it exists, else a steady signal
    with a new detail every run."""
    _quiet_wd(wd)
    write_sensor(wd, "churn", f"if [ -e out ]; then cat out; else {CHURN}; fi")
    _pulse(wd)
    _pulse(wd)  # sealed with the churning sensor in it
    return wd


# Outputs that keep the signal's text `{"n":1}` to a lenient parser but that the full
# beat (orjson) reads otherwise, or that this parser cannot be sure of: never quiet.
UNSURE_OUTPUTS = {
    "NaN in detail": '{"signal": {"n": 1}, "detail": {"x": NaN}}',
    "Infinity in detail": '{"signal": {"n": 1}, "detail": {"x": -Infinity}}',
    "float overflow": '{"signal": {"n": 1}, "detail": {"x": 1e400}}',
    "integer past 64 bits": '{"signal": {"n": 1}, "detail": {"x": 123456789012345678901234}}',
    "duplicate key": '{"signal": {"n": 2, "n": 1}, "detail": {}}',
    "duplicate signal": '{"signal": {"n": 2}, "signal": {"n": 1}}',
    "lone surrogate": '{"signal": {"n": 1}, "detail": {"x": "\\ud800"}}',
    "too deep": '{"signal": {"n": 1}, "detail": ' + "[" * 70 + "]" * 70 + "}",
    "trailing garbage": '{"signal": {"n": 1}, "detail": {}} x',
    "not utf-8": b'{"signal": {"n": 1}, "detail": {"x": "\xff"}}',
    "a bare object": '{"n": 1}',
    "signal changed": '{"signal": {"n": 2}, "detail": {}}',
    "signal type changed": '{"signal": {"n": 1.0}, "detail": {}}',
}


@pytest.mark.parametrize("name", sorted(UNSURE_OUTPUTS))
def test_a_churning_sensor_is_quiet_only_when_sure_its_signal_held(wd: Paths, name: str) -> None:
    _churning_wd(wd)
    assert _pulse(wd).get("sealed") is True
    out = UNSURE_OUTPUTS[name]
    (wd.root / "out").write_bytes(out if isinstance(out, bytes) else out.encode())
    beat = _pulse(wd)
    assert not beat.get("sealed"), f"{name}: the seal vouched for an output it cannot read"
    assert beat["world_hash"] == _sensed_hash(wd)


def test_a_churning_detail_with_another_change_is_not_quiet(wd: Paths) -> None:
    _churning_wd(wd)
    (wd.root / "value").write_text("5\n")  # another sensor's signal moves in the same beat
    beat = _pulse(wd)
    assert beat["outcome"] == "decided" and not beat.get("sealed")
    assert beat["world_hash"] == _sensed_hash(wd)


def test_a_churning_detail_with_a_steady_signal_stays_quiet(wd: Paths) -> None:
    _churning_wd(wd)
    snapshot = wd.snapshots / "sensor-churn.json"
    seen = set()
    for _ in range(3):
        beat = _pulse(wd)
        assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
        stored = json.loads(snapshot.read_text())
        assert stored["signal"] == {"n": 1}
        seen.add(stored["detail"]["at"])  # the snapshot carries this run's detail
    assert len(seen) == 3
    assert beat["world_hash"] == beat["prev_hash"] == _sensed_hash(wd)
    # The updated seal still catches what it always caught.
    (wd.goals / "alpha.md").write_text("# Alpha\n\nkeep it UP\n")
    assert not _pulse(wd).get("sealed")


def test_a_full_beat_finds_the_churned_snapshot_as_it_would_have_written_it(wd: Paths) -> None:
    _churning_wd(wd)
    (wd.root / "out").write_text('{"signal": {"n": 1}, "detail": {"b": [1.5, "é"], "a": null}}')
    assert _pulse(wd).get("sealed") is True
    quiet_written = json.loads((wd.snapshots / "sensor-churn.json").read_text())
    assert _pulse(wd, "-v")["outcome"] == "skipped"  # the full path rewrites it its own way
    assert json.loads((wd.snapshots / "sensor-churn.json").read_text()) == quiet_written


def test_a_churning_quiet_beat_loads_json_only(wd: Paths) -> None:
    _churning_wd(wd)
    heavy = ("orjson", "pathlib", "subprocess", "dataclasses", "enum", "typing")
    heavy += ("looop_py.beat.pulse", "looop_py.sensing.sensors", "looop_py.jsonio", "yaml")
    code = _child_pulse(
        wd, f"print('HEAVY', [m for m in {heavy!r} if m in set(sys.modules) - before])"
    )
    for _ in range(3):  # seal for this interpreter and argv, then churn quietly
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr
    assert _last_beat(wd).get("sealed") is True


def test_the_steady_parser_caps_depth_as_jsonio_does() -> None:
    from looop_py.sensing import steady

    assert steady.MAX_DEPTH == jsonio.MAX_DEPTH


# -- a live claim ----------------------------------------------------------------------


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[bytes]]:
    """A live process for a claim to follow."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def _claim(wd: Paths, name: str, pid: int, *args: str) -> None:
    done = invoke_looop("-C", str(wd.root), "claim", name, "--pid", str(pid), *args)
    assert done.returncode == 0, done.stderr


def _claimed_wd(wd: Paths, pid: int) -> Paths:
    _quiet_wd(wd)
    _claim(wd, "repo", pid, "--ttl", "3600")
    assert _pulse(wd)["outcome"] == "decided"  # a new claim wakes the loop once
    _pulse(wd)  # and the beat that finds it steady seals it
    return wd


CLAIM_MUTATIONS = {
    "holder dies": lambda wd, h: (h.kill(), h.wait()),
    "claim renewed": lambda wd, h: _claim(wd, "repo", h.pid, "--ttl", "60", "--renew"),
    "claim file removed": lambda wd, h: (wd.claims / "repo.json").unlink(),
    "another claim": lambda wd, h: _claim(wd, "deploy", h.pid, "--ttl", "3600"),
    "claim file rewritten": lambda wd, h: (wd.claims / "repo.json").write_text(
        (wd.claims / "repo.json").read_text()
    ),
    "a stray file in claims": lambda wd, h: (wd.claims / "notes.txt").write_text("x"),
}


@pytest.mark.parametrize("name", sorted(CLAIM_MUTATIONS))
def test_no_claim_change_slips_past_the_seal(
    wd: Paths, holder: subprocess.Popen[bytes], name: str
) -> None:
    _claimed_wd(wd, holder.pid)
    assert _pulse(wd).get("sealed") is True
    CLAIM_MUTATIONS[name](wd, holder)
    beat = _pulse(wd)
    assert not beat.get("sealed"), f"{name}: the seal vouched for a changed claim"
    assert beat["world_hash"] == _sensed_hash(wd)


def test_a_live_claim_stays_quiet_until_it_expires(
    wd: Paths, holder: subprocess.Popen[bytes]
) -> None:
    _claimed_wd(wd, holder.pid)
    for _ in range(3):
        beat = _pulse(wd)
        assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
    assert beat["world_hash"] == beat["prev_hash"] == _sensed_hash(wd)
    expires = json.loads((wd.claims / "repo.json").read_text())["expires_at"]
    sealed = seal.read(str(wd.root))
    assert sealed is not None and sealed.until <= expires  # expiry is a full beat's work
    assert sealed.holders == [(holder.pid, pytest.approx(sealed.holders[0][1]))]


def test_a_dead_holders_claim_is_reaped_by_the_full_beat(
    wd: Paths, holder: subprocess.Popen[bytes]
) -> None:
    _claimed_wd(wd, holder.pid)
    holder.kill()
    holder.wait()
    beat = _pulse(wd)
    assert not beat.get("sealed") and beat["outcome"] == "decided"
    assert not (wd.claims / "repo.json").exists()
    assert _pulse(wd).get("sealed") is True  # nothing in play again: sealed as before


# -- a pending ask and the answered ones --------------------------------------------


@pytest.fixture
def asker(wd: Paths) -> Iterator[subprocess.Popen[str]]:
    """A `looop ask` waiting on a human, as a shell or a worker runs it."""
    looop = shutil.which("looop") or str(Path(sys.executable).with_name("looop"))
    proc = subprocess.Popen(
        [looop, "-C", str(wd.root), "ask", "--prompt", "ship it?"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: any(wd.asks.glob("*.json")) and _waiter_recorded(wd), what="the ask")
    yield proc
    proc.kill()
    proc.wait()


def _waiter_recorded(wd: Paths) -> bool:
    return all("waiter" in json.loads(p.read_text()) for p in wd.asks.glob("*.json"))


def _ask_id(wd: Paths) -> str:
    return next(wd.asks.glob("*.json")).stem


def _asked_wd(wd: Paths) -> Paths:
    _quiet_wd(wd)
    _pulse(wd)  # a new ask wakes the loop once
    _pulse(wd)  # and the beat that finds it steady seals it
    return wd


ASK_MUTATIONS = {
    "answered": lambda wd, p: invoke_looop("-C", str(wd.root), "answer", _ask_id(wd), "yes"),
    "withdrawn": lambda wd, p: invoke_looop("-C", str(wd.root), "withdraw", _ask_id(wd)),
    "waiter killed": lambda wd, p: (p.kill(), p.wait()),
    "ask rewritten": lambda wd, p: (wd.asks / f"{_ask_id(wd)}.json").write_text(
        (wd.asks / f"{_ask_id(wd)}.json").read_text()
    ),
    "a torn answer": lambda wd, p: (wd.answers / "zz.json").write_text("{"),
    "a stray dotfile in asks": lambda wd, p: (wd.asks / ".x.tmp").write_text("{"),
}


@pytest.mark.parametrize("name", sorted(ASK_MUTATIONS))
def test_no_ask_change_slips_past_the_seal(
    wd: Paths, asker: subprocess.Popen[str], name: str
) -> None:
    _asked_wd(wd)
    assert _pulse(wd).get("sealed") is True
    ASK_MUTATIONS[name](wd, asker)
    beat = _pulse(wd)
    assert not beat.get("sealed"), f"{name}: the seal vouched for a changed mailbox"
    assert beat["world_hash"] == _sensed_hash(wd)


def test_a_pending_ask_and_answered_ones_stay_quiet(
    wd: Paths, asker: subprocess.Popen[str], holder: subprocess.Popen[bytes]
) -> None:
    """Everything in play at once: a pending ask, its answered history, a live claim and
    a churning detail — the beat stays sealed."""
    _churning_wd(wd)
    done = invoke_looop("-C", str(wd.root), "ask", "--prompt", "old?", "--timeout", "0.01")
    assert done.returncode == 4, done.stderr  # an expired ask, then answered: history
    old = next(p.stem for p in wd.asks.glob("*.json") if "old?" in p.read_text())
    assert invoke_looop("-C", str(wd.root), "answer", old, "late").returncode == 0
    _claim(wd, "repo", holder.pid, "--ttl", "3600")
    _pulse(wd)
    _pulse(wd)
    for _ in range(3):
        beat = _pulse(wd)
        assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
    assert beat["world_hash"] == beat["prev_hash"] == _sensed_hash(wd)
    pending = json.loads((wd.snapshots / "sys-asks.json").read_text())["signal"]["pending"]
    assert pending == [_waiting_id(wd)]
    invoke_looop("-C", str(wd.root), "answer", _waiting_id(wd), "yes")
    assert not _pulse(wd).get("sealed")


def _waiting_id(wd: Paths) -> str:
    return next(p.stem for p in wd.asks.glob("*.json") if "ship it?" in p.read_text())
