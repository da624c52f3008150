"""The quiet beat while a worker runs (beat/vouch.py `sessions_now`, beat/quiet.py).

A live worker's output log churns as it works; its signal (id, state, exit code,
health) rests only on its process (pid + create time), its records (status.json,
meta.json, … surveyed by stat) and its output log's mtime (health turns `stuck`
stuck_after_s after it). The hostile question first: can the seal vouch for a
worker that ended, was killed, went quiet past stuck_after_s, or whose records
were edited? `looop sense` is the oracle, as in test_quiet.py.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from looop_py.identity import is_alive
from looop_py.sensing import seal, survey
from looop_py.workdir.paths import Paths
from looop_py.workers import aider, records
from tests.beat.test_quiet import _last_beat, _pulse, _quiet_wd, _sensed_hash
from tests.conftest import invoke_looop, wait_for

# Writes a line every 100 ms until the test releases it.
CHATTY = "while [ ! -e {release} ]; do date +%N; sleep 0.1; done; echo done"
SILENT = "while [ ! -e {release} ]; do sleep 0.05; done"
# Its usage streams into the events log beside its output, as aider's does (workers/aider.py).
EVENT = (
    '{{"event": "message_send", "properties": {{"prompt_tokens": 120, "completion_tokens": 30}}}}'
)
USAGE = (
    'log="$LOOOP_SESSION_DIR/aider.events.jsonl"; : > "$log"; '
    f"while [ ! -e {{release}} ]; do echo '{EVENT}' >> \"$log\"; date +%N; sleep 0.1; done"
)


def _meta(wd: Paths) -> dict[str, object]:
    return dict(json.loads((wd.sessions / "w1" / "meta.json").read_text()))


def _sealed_once(wd: Paths) -> None:
    """Beat until a beat seals the live worker (it wakes the loop once, then is steady)."""

    def sealed() -> bool:
        found = seal.read(str(wd.root))
        if found is not None and found.outputs:
            return True
        _pulse(wd)
        return False

    wait_for(sealed, 20, lambda: f"a seal; the last beat: {_last_beat(wd)}", interval=0.2)


@pytest.fixture
def release(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "release"
    yield path
    path.touch()  # whatever the test did, the worker ends


def _working_wd(wd: Paths, release: Path, script: str = CHATTY) -> Paths:
    _quiet_wd(wd)
    body = script.format(release=release)
    done = invoke_looop("-C", str(wd.root), "worker", "start", "w1", "--runtime", "shell", body)
    assert done.returncode == 0, done.stderr
    wait_for(
        lambda: json.loads((wd.sessions / "w1" / "status.json").read_text())["state"] == "running"
    )
    _sealed_once(wd)
    return wd


def _gone(wd: Paths, key: str = "pid") -> Callable[[], bool]:
    meta = _meta(wd)
    created = meta["create_time" if key == "pid" else "supervisor_create_time"]
    assert is_alive(meta[key], created), f"{key} runs to begin with"
    return lambda: not is_alive(meta[key], created)


def _ends(wd: Paths, release: Path) -> None:
    """The worker ends and its supervisor, which records how it ended, exits after it: the
    end settled (a beat between the two would see an end `looop sense` no longer does)."""
    gone, recorded = _gone(wd), _gone(wd, "supervisor_pid")
    release.touch()
    wait_for(lambda: gone() and recorded(), 10, "the worker to end and its end recorded")


def _sigkilled(wd: Paths, release: Path) -> None:
    """Its supervisor first, so nothing rewrites status.json: only the pid is gone."""
    meta = _meta(wd)
    before = (wd.sessions / "w1" / "status.json").read_bytes()
    for key in ("supervisor_pid", "pid"):
        pid, gone = meta[key], _gone(wd, key)
        assert isinstance(pid, int)
        os.kill(pid, signal.SIGKILL)
        wait_for(gone, 10, f"{key} to die")
    assert (wd.sessions / "w1" / "status.json").read_bytes() == before


def _status_edited(wd: Paths, release: Path) -> None:
    path = wd.sessions / "w1" / "status.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "state": "exited"}))


def _status_rewritten(wd: Paths, release: Path) -> None:
    path = wd.sessions / "w1" / "status.json"
    path.write_text(path.read_text())  # same bytes, another write: re-read by a full beat


def _output_set_back(wd: Paths, release: Path) -> None:
    """Its output's mtime an hour back: health `stuck` before the seal expires."""
    log = wd.sessions / "w1" / "output.log"
    os.utime(log, (log.stat().st_atime - 3600, log.stat().st_mtime - 3600))


def _output_removed(wd: Paths, release: Path) -> None:
    (wd.sessions / "w1" / "output.log").unlink()


def _another_worker(wd: Paths, release: Path) -> None:
    script = SILENT.format(release=release)
    done = invoke_looop("-C", str(wd.root), "worker", "start", "w2", "--runtime", "shell", script)
    assert done.returncode == 0, done.stderr


Mutation = Callable[[Paths, Path], object]

WORKER_MUTATIONS: dict[str, Mutation] = {
    "worker ends": _ends,
    "worker SIGKILLed, status.json not rewritten": _sigkilled,
    "status.json edited": _status_edited,
    "status.json rewritten": _status_rewritten,
    "output log mtime set back": _output_set_back,
    "output log removed": _output_removed,
    "another worker starts": _another_worker,
}


def _breaks_the_seal(wd: Paths, release: Path, name: str, mutate: Mutation) -> None:
    """After a sealed beat, `mutate` must make the next beat a full one, seeing what sense sees."""
    assert _pulse(wd).get("sealed") is True
    mutate(wd, release)
    beat = _pulse(wd)
    assert not beat.get("sealed"), f"{name}: the seal vouched for a changed worker"
    assert beat["world_hash"] == _sensed_hash(wd)


@pytest.mark.parametrize("name", sorted(WORKER_MUTATIONS))
def test_no_worker_change_slips_past_the_seal(wd: Paths, release: Path, name: str) -> None:
    _working_wd(wd, release, SILENT if name == "output log mtime set back" else CHATTY)
    _breaks_the_seal(wd, release, name, WORKER_MUTATIONS[name])


def test_a_worker_gone_quiet_past_stuck_after_breaks_the_seal(wd: Paths, release: Path) -> None:
    """No output for stuck_after_s: its health turns `stuck` by the clock alone."""
    config = wd.root / "looop.toml"
    config.write_text(config.read_text() + "\n[workers]\nstuck_after_s = 2\n")
    _working_wd(wd, release, SILENT)
    log = wd.sessions / "w1" / "output.log"
    sealed = seal.read(str(wd.root))
    assert sealed is not None and sealed.until <= log.stat().st_mtime + 2 + 1e-6
    before = _sensed_hash(wd)
    wait_for(lambda: _sensed_hash(wd) != before, 10, "the worker to turn stuck", interval=0.3)
    beat = _pulse(wd)
    assert not beat.get("sealed") and beat["world_hash"] == _sensed_hash(wd)
    sensed = invoke_looop("-C", str(wd.root), "sense", "--json").stdout
    assert '"health": "stuck"' in sensed or '"health":"stuck"' in sensed


def test_a_live_worker_with_a_steady_signal_stays_quiet(wd: Paths, release: Path) -> None:
    _working_wd(wd, release)
    log = wd.sessions / "w1" / "output.log"
    sealed = seal.read(str(wd.root))
    assert sealed is not None
    assert [pid for pid, _ in sealed.holders] == [_meta(wd)["pid"]]
    assert [rel for rel, _ in sealed.outputs] == ["sessions/w1/output.log"]
    for _ in range(3):
        size = log.stat().st_size
        wait_for(lambda: log.stat().st_size > size, 5, "the worker to write more")  # noqa: B023
        beat = _pulse(wd)
        assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
    assert beat["world_hash"] == beat["prev_hash"] == _sensed_hash(wd)


def _usage_log(wd: Paths) -> Path:
    return wd.sessions / "w1" / "aider.events.jsonl"


def _usage_log_replaced(wd: Paths, release: Path) -> None:
    log = _usage_log(wd)
    (log.parent / "events.tmp").write_text(log.read_text())
    (log.parent / "events.tmp").replace(log)


USAGE_MUTATIONS: dict[str, Mutation] = {
    "worker ends": _ends,
    "usage log removed": lambda wd, release: _usage_log(wd).unlink(),
    "usage log replaced": _usage_log_replaced,
    "status.json rewritten": _status_rewritten,
}


@pytest.mark.parametrize("name", sorted(USAGE_MUTATIONS))
def test_no_change_past_a_growing_usage_log_slips_past_the_seal(
    wd: Paths, release: Path, name: str
) -> None:
    """The usage log is surveyed by name only: whatever else changes still shows."""
    _working_wd(wd, release, USAGE)
    _breaks_the_seal(wd, release, name, USAGE_MUTATIONS[name])


def test_a_worker_whose_usage_log_grows_stays_quiet(wd: Paths, release: Path) -> None:
    """Usage is detail, not signal: its log growing is no reason for a full beat."""
    _working_wd(wd, release, USAGE)
    log = _usage_log(wd)
    for _ in range(3):
        size = log.stat().st_size
        wait_for(lambda: log.stat().st_size > size, 5, "more usage")  # noqa: B023
        beat = _pulse(wd)
        assert beat.get("sealed") is True and beat["outcome"] == "skipped", beat
    assert beat["world_hash"] == beat["prev_hash"] == _sensed_hash(wd)


def test_the_survey_names_the_worker_logs_the_supervisor_writes() -> None:
    assert set(survey.LOGS) == {records.OUTPUT, aider.EVENTS, aider.CHAT}
