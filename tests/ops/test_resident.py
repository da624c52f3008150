"""`looop up`: a resident pulse that reacts to an edit in under a second and idles cheaply."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.coord.choose import Reopening
from looop_py.ops import resident
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, wait_for, write_sensor


def beats(paths: Paths) -> int:
    try:
        lines = paths.events.read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if jsonio.loads(line).get("event") == "beat")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
def test_up_reacts_within_a_second_idles_cheaply_and_down_stops_it(wd: Paths) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "up", "--interval", "3600"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        wait_for(lambda: beats(wd) >= 1, timeout=20, what="the first beat")
        wait_for(lambda: resident.running(wd) == proc.pid, what="the pid file")
        again = invoke_looop("-C", str(wd.root), "up")
        assert again.returncode == 3 and "already running" in again.stderr

        time.sleep(0.5)  # let the first beat's writes settle, then watch it idle
        before, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(3.0)
        idle = (cpu_seconds(proc.pid) - before) / (time.monotonic() - t0)
        assert idle < 0.01, f"idle CPU {idle:.1%}"
        assert beats(wd) == 1  # an hour's interval: nothing else beat

        # A human's answer is acted on in well under a second, not at the next minute.
        ask = mailbox.open_ask(open_wd(wd), prompt="Deploy?", asker="human", now=time.time())
        wait_for(lambda: beats(wd) >= 2, timeout=2, what="the beat the new ask causes")
        start = time.monotonic()
        mailbox.answer(open_wd(wd), ask.id, "yes", now=time.time())
        wait_for(lambda: beats(wd) >= 3, timeout=2, what="a beat after the answer")
        reacted = time.monotonic() - start
        assert reacted < 1.0, f"reacted in {reacted:.2f} s"

        down = invoke_looop("-C", str(wd.root), "down")
        assert down.returncode == 0 and f"pid {proc.pid}" in down.stdout
        assert proc.wait(timeout=10) == 0
        assert resident.running(wd) is None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()


def test_the_unit_names_this_work_dir(wd: Paths) -> None:
    done = invoke_looop("-C", str(wd.root), "up", "--print-unit", "--interval", "30")
    assert done.returncode == 0
    assert f"-C {wd.root} up --interval 30" in done.stdout and "[Service]" in done.stdout
    assert invoke_looop("-C", str(wd.root), "down").stdout.strip() == "looop up was not running"


@pytest.mark.slow
def test_up_beats_at_once_on_each_edit_and_a_worker_ending(wd: Paths) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "up", "--interval", "3600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )

    def beat_after(edit: Callable[[], object], what: str) -> float:
        wait_for(lambda: resident.running(wd) == proc.pid, what="the pid file")
        n = beats(wd)
        start = time.monotonic()
        edit()
        wait_for(lambda: beats(wd) > n, timeout=10, what=f"a beat after {what}")
        return time.monotonic() - start

    try:
        wait_for(lambda: beats(wd) >= 1, timeout=20, what="the first beat")
        took = {
            "goal": beat_after(lambda: (wd.goals / "g.md").write_text("# G\n"), "a goal"),
            "sensor": beat_after(
                lambda: write_sensor(wd, "s", "echo '{\"signal\": {}}'"), "a sensor edit"
            ),
            "goals/ recreated": beat_after(lambda: shutil.rmtree(wd.goals), "goals/ removed"),
        }
        took["goal in the new goals/"] = beat_after(wd.goals.mkdir, "goals/ recreated")
        took["worker"] = beat_after(
            lambda: invoke_looop("-C", str(wd.root), "worker", "start", "w1", "true"),
            "a worker ends",
        )
        assert (wd.sessions / "w1" / "status.json").exists()
        assert all(s < 5 for s in took.values()), took  # milliseconds when the machine is idle
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def test_scheduled_beats_keep_their_interval_with_nothing_edited(wd: Paths) -> None:
    opened = Reopening(wd)
    stop = threading.Event()
    times: list[float] = []

    def on_beat(result: object) -> None:
        times.append(time.monotonic())
        if len(times) == 3:
            stop.set()

    try:
        assert resident.run(opened, interval_s=0.3, stop=stop, on_beat=on_beat) == 3
    finally:
        opened.close()
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g >= 0.3 for g in gaps), gaps  # the timer, not an event, started them
