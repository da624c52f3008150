"""The fence at the side effect: a beat confirms its pulse token with etcd just before a
command, a worker, a notification or a round's action leaves looop's hands, and passes
it on as LOOOP_FENCE; `looop fence check` is how a script asks again.

Rainy first: a beat whose pulse passed to another host while it decided does not run
its command, and says so in the journal with the token it lost; `fence check` on a lost
token exits 4. Then the happy path: the command runs with LOOOP_FENCE, and the journal
line names the token it ran under. On files the same code path asks nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome
from looop_py.coord import choose
from looop_py.coord.remote import renew_deadline
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.workdir.paths import Paths
from tests.conftest import close_opened, open_wd, run_looop
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_shared_records import Hosts
from tests.etcdserver import Cluster


def act_script(tmp: Path) -> tuple[Path, Path]:
    """An allowlisted command that appends `ID FENCE START DEADLINE CHECK` to an act log
    outside looop (the count the fault suite trusts), CHECK being `looop fence check`'s
    exit code from inside the command."""
    log = tmp / "acts.log"
    script = tmp / "act.sh"
    script.write_text(
        "#!/bin/sh\n"
        'start=$(date +%s.%N); sleep "${2:-0}"\n'
        f'"$LOOOP_BIN" fence check >/dev/null 2>&1; ok=$?\n'
        f'echo "$1 ${{LOOOP_FENCE:--}} $start ${{LOOOP_FENCE_DEADLINE:--}} $ok" >> {log}\n'
    )
    script.chmod(0o755)
    return script, log


def shell_config(script: Path) -> str:
    return f'[decider]\nbackend = "noop"\n\n[gates]\nshell_allow = ["{script} *"]\n'


class Shell:
    """A decider proposing the act script with a fresh id each time."""

    name = "shell"

    def __init__(self, script: Path, before: object = None) -> None:
        self.script = script
        self.before = before
        self.n = 0

    def decide(self, request: DecideRequest) -> Decision:
        self.n += 1
        if callable(self.before):
            self.before()
        return Decision(move={"action": "run_shell", "cmd": f"{self.script} d{self.n}"})


@pytest.fixture
def two(etcd: Cluster, tmp_path: Path) -> Iterator[Hosts]:
    yield Hosts("etcd", tmp_path, etcd)
    close_opened()


def _events(wd: Paths, name: str) -> list[dict[str, object]]:
    lines = wd.events.read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


@pytest.mark.etcd
def test_a_beat_that_lost_the_pulse_while_deciding_does_not_act_and_says_so(
    two: Hosts, tmp_path: Path
) -> None:
    script, log = act_script(tmp_path)
    a, b = two.workdir("a", shell_config(script)), two.workdir("b", shell_config(script))

    def usurp() -> None:  # host a's lease lapses while it thinks; b takes the pulse
        choose.coordinator(open_wd(a)).resign()  # as the lease expiring would
        with choose.coordinator(open_wd(b)).pulse():
            pass

    result = beat(open_wd(a), force=True, decider=Shell(script, usurp))
    assert not log.exists(), log.read_text()  # the command never started
    assert result.outcome is BeatOutcome.SKIPPED
    assert "lost the pulse at token" in (result.reason or "")
    text = a.journal.read_text()
    assert "decided run-shell" in text and "not acted: lost the pulse at token" in text, text
    fenced = _events(a, "move_fenced")
    assert len(fenced) == 1 and fenced[0]["acted"] is False and isinstance(fenced[0]["token"], int)


@pytest.mark.etcd
def test_a_lost_token_fails_fence_check_and_a_malformed_one_is_usage(two: Hosts) -> None:
    a = two.workdir("a")
    coord = choose.coordinator(open_wd(a))
    with coord.pulse() as token:
        held = run_looop("-C", str(a.root), "fence", "check", f"pulse:{token}", "--json")
        assert held.returncode == 0, held.stderr
        assert json.loads(held.stdout)["held"] is True
    coord.resign()  # `looop down`: the sticky pulse goes
    gone = run_looop("-C", str(a.root), "fence", "check", env={"LOOOP_FENCE": f"pulse:{token}"})
    assert gone.returncode == 4 and f"lost the pulse at token {token}" in gone.stderr
    for bad in ("pulse", "pulse:x", "pulse:0", "../x:3"):
        r = run_looop("-C", str(a.root), "fence", "check", bad)
        assert r.returncode == 2, (bad, r.stderr)
    none = run_looop("-C", str(a.root), "fence", "check", env={"LOOOP_FENCE": ""})
    assert none.returncode == 2 and "LOOOP_FENCE is not set" in none.stderr


@pytest.mark.etcd
def test_the_command_runs_with_its_token_and_the_journal_names_it(
    two: Hosts, tmp_path: Path
) -> None:
    script, log = act_script(tmp_path)
    a = two.workdir("a", shell_config(script))
    before = time.time()
    result = beat(open_wd(a), force=True, decider=Shell(script))
    assert result.outcome is BeatOutcome.DECIDED, result.reason
    [line] = log.read_text().splitlines()
    act_id, fence, start, deadline, check = line.split()
    name, _, token = fence.partition(":")
    assert (act_id, name, check) == ("d1", "pulse", "0")  # fence check held inside the act
    assert before <= float(start) < float(deadline)  # it started before its renew deadline
    assert f"token {token}" in (result.journal or "")


def test_on_files_the_command_runs_without_a_token_and_fence_check_says_why(
    tmp_path: Path,
) -> None:
    hosts = Hosts("files", tmp_path, None)
    script, log = act_script(tmp_path)
    a = hosts.workdir("a", shell_config(script))
    result = beat(open_wd(a), force=True, decider=Shell(script))
    assert result.outcome is BeatOutcome.DECIDED, result.reason
    [line] = log.read_text().splitlines()
    assert line.split()[1] == "-" and line.split()[-1] == "0"  # no token; the check passes
    assert "token" not in (result.journal or "")
    r = run_looop("-C", str(a.root), "fence", "check")
    assert r.returncode == 0 and "pulse lock on this machine" in r.stdout


def test_the_renew_deadline_leaves_a_drift_margin_inside_the_ttl() -> None:
    assert renew_deadline(100.0, 2) == 101.5  # the margin is at least half a second
    assert renew_deadline(100.0, 10) == 107.5  # a quarter of a longer TTL
    assert renew_deadline(100.0, 10) < 100.0 + 10  # always before etcd could expire it


@pytest.mark.etcd
def test_the_python_api_opens_an_etcd_work_dir_with_no_special_import(two: Hosts) -> None:
    a = two.workdir("a")
    code = (
        "import sys, pathlib, looop_py\n"
        "wd = looop_py.open_workdir(looop_py.Paths(pathlib.Path(sys.argv[1])))\n"
        "try:\n"
        "    wd.shelf.put('state', 'probe', b'{}')\n"
        "    print(wd.shelf.backend, wd.shelf.get('state', 'probe'))\n"
        "finally:\n"
        "    wd.close()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(a.root)],
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if k != "LOOOP_DIR"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["etcd", "b'{}'"]
    assert open_wd(a).shelf.get("state", "probe") == b"{}"  # on etcd, seen by the test too
