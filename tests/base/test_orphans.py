"""A sensor is a reading, not a daemon: whatever it leaves running is ended, setsid or not."""

from __future__ import annotations

import os
from pathlib import Path

from looop_py import orphans, procs
from looop_py.beat.pulse import beat
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd, run_looop, wait_for, write_sensor


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _gone(pids: list[int], timeout: float = 3.0) -> bool:
    """Wait until none of `pids` is alive; the test fails after `timeout` s (True to assert)."""

    def alive() -> list[int]:
        return [p for p in pids if _alive(p)]

    wait_for(lambda: not alive(), timeout, lambda: f"every process to end; alive: {alive()}")
    return True


DAEMONS = """
pids="$PWD/pids"
(setsid bash -c 'echo $$ >> "$0"; exec sleep 999' "$pids" &)
(setsid bash -c 'trap "" TERM HUP; echo $$ >> "$0"; sleep 999; :' "$pids" > /dev/null 2>&1 &)
setsid bash -c 'echo $$ >> "$0"; exec sleep 999' "$pids" < /dev/null > /dev/null 2>&1 &
for i in 1 2 3 4 5 6 7 8; do
  (setsid bash -c '(setsid bash -c "echo \\$\\$ >> $0; exec sleep 999" "$0" &); echo $$ >> "$0"; \
sleep 999' "$pids" > /dev/null 2>&1 &)
done
sleep 0.2
echo started
"""


def test_setsid_daemons_a_sensor_leaves_are_ended_after_the_beat(wd: Paths) -> None:
    write_sensor(wd, "daemons", DAEMONS)
    result = beat(open_wd(wd))
    assert result.outcome == "decided"
    pids = _pids(wd.root / "pids")
    assert len(pids) >= 3 + 16, pids
    assert _gone(pids), [p for p in pids if _alive(p)]
    assert {r.stem: r.snapshot["signal"] for r in result.readings}["sensor-daemons"] == "started"


def test_what_a_timed_out_sensor_left_in_another_session_is_ended(wd: Paths) -> None:
    write_sensor(
        wd,
        "slow",
        "# looop:timeout=0.5\n"
        """setsid bash -c 'echo $$ >> "$0"; exec sleep 999' "$PWD/pids" < /dev/null &> /dev/null &
sleep 100
""",
    )
    result = beat(open_wd(wd))
    snap = {r.stem: r.snapshot for r in result.readings}["sensor-slow"]
    assert snap["signal"] == {"error": True, "exit_code": 124}
    pids = _pids(wd.root / "pids")
    assert pids and _gone(pids)


def test_the_real_cli_pulse_leaves_nothing_behind(wd: Paths) -> None:
    write_sensor(wd, "daemons", DAEMONS)
    out = run_looop("-C", str(wd.root), "pulse")
    assert out.returncode == 0, out.stderr
    pids = _pids(wd.root / "pids")
    assert len(pids) >= 19 and _gone(pids)
    out = run_looop("-C", str(wd.root), "sense")  # `looop sense` runs the same sensors
    assert out.returncode == 0, out.stderr
    assert _gone(_pids(wd.root / "pids"))


def test_children_looop_had_before_are_kept(tmp_path: Path) -> None:
    import subprocess

    keep = subprocess.Popen(["sleep", "30"])
    try:
        with orphans.adopting() as ended:
            res = procs.run(
                ["bash", "-c", "(setsid sleep 999 &); echo ok"],
                cwd=tmp_path,
                env=dict(os.environ),
                timeout_s=5,
                cap=100,
            )
        assert res.stdout == b"ok\n"
        assert ended == [1]
        assert keep.poll() is None  # not adopted: ours from before, left alone
    finally:
        keep.kill()
        keep.wait()
