"""`looop doctor` (a test per check, passing and failing) and `looop cron` on the real crontab."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from filelock import FileLock

from looop_py import jsonio
from looop_py.locks import PulseLock
from looop_py.ops import cron, doctor
from looop_py.ops.doctor import Verdict
from looop_py.workdir import config as config_mod
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, run_looop, wait_for

CRONTAB = shutil.which("crontab")
needs_crontab = pytest.mark.skipif(
    CRONTAB is None and os.environ.get("CI") != "true",
    reason="no crontab program here (.ci/run installs Debian's cron)",
)


def by_name(report: doctor.Report) -> dict[str, doctor.Check]:
    return {c.name: c for c in report.checks}


def test_a_fresh_init_passes_doctor_offline(wd: Paths) -> None:
    done = invoke_looop("-C", str(wd.root), "doctor", "--offline", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = jsonio.loads(done.stdout)
    assert report["ok"] is True
    names = {c["name"] for c in report["checks"]}
    assert {"work dir", "disk", "clock", "config", "decider", "budget", "schedule"} <= names


def test_work_dir_check(wd: Paths) -> None:
    assert doctor.work_dir(wd).verdict is Verdict.OK
    shutil.rmtree(wd.rounds)
    failed = doctor.work_dir(wd)
    assert failed.verdict is Verdict.FAIL and "rounds" in failed.message
    assert failed.fix == f"looop init {wd.root}"


def test_config_check(wd: Paths) -> None:
    wd.config.write_text("[sensors]\ntimeout_s = 'soon'\n")
    report = doctor.diagnose(wd, offline=True)
    assert not report.ok and by_name(report)["config"].verdict is Verdict.FAIL
    done = invoke_looop("-C", str(wd.root), "doctor", "--offline")
    assert done.returncode == 1 and "✗ config" in done.stdout


def test_decider_check(wd: Paths) -> None:
    assert doctor.decider(open_wd(wd), offline=False, now=time.time()).verdict is Verdict.OK
    wd.config.write_text('[decider]\nbackend = "command"\ncommand = "echo not a move"\n')
    assert doctor.decider(open_wd(wd), offline=True, now=time.time()).verdict is Verdict.OK
    failed = doctor.decider(open_wd(wd), offline=False, now=time.time())
    assert failed.verdict is Verdict.FAIL and failed.message.startswith("command:")


def test_budget_check(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "command"\ncommand = "true"\n')
    assert doctor.budget(config_mod.load(wd.config)).verdict is Verdict.WARN
    wd.config.write_text(
        '[decider]\nbackend = "command"\ncommand = "true"\n[limits]\ndaily_usd = 2.5\n'
    )
    ok = doctor.budget(config_mod.load(wd.config))
    assert ok.verdict is Verdict.OK and "$2.5" in ok.message


def test_runtime_check(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config_mod.load(wd.config)
    assert doctor.runtime(cfg, "shell").verdict is Verdict.OK
    monkeypatch.setenv("PATH", str(wd.root))  # nothing on PATH
    missing = doctor.runtime(cfg, "claude")
    assert missing.verdict is Verdict.FAIL and "`claude` is not on PATH" in missing.message


def test_disk_check(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    assert doctor.disk_space(wd).verdict is Verdict.OK
    monkeypatch.setattr(doctor.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(1, 1, 0))  # type: ignore[attr-defined]
    assert doctor.disk_space(wd).verdict is Verdict.FAIL


def test_clock_check(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    assert doctor.clock_skew(wd).verdict is Verdict.OK
    real = time.time
    monkeypatch.setattr(doctor.time, "time", lambda: real() + 3600)
    skewed = doctor.clock_skew(wd)
    assert skewed.verdict is Verdict.FAIL and "-3600 s" in skewed.message
    assert not any(p.name.startswith(".doctor-") for p in wd.state.iterdir())


def test_pulse_lock_check(wd: Paths) -> None:
    cfg = config_mod.load(wd.config)
    now = time.time()
    assert doctor.pulse_lock(wd, cfg, now).verdict is Verdict.OK
    holder = subprocess.Popen(
        ["flock", str(wd.pulse_lock), "sleep", "30"], stdout=subprocess.DEVNULL
    )
    try:
        wait_for(PulseLock(wd.pulse_lock).held_elsewhere, 10, "flock to hold the pulse lock")
        assert doctor.pulse_lock(wd, cfg, now).verdict is Verdict.OK  # no beat yet: running
        journal.emit(open_wd(wd), "beat", now - 3 * 3600, outcome="skipped")
        hung = doctor.pulse_lock(wd, cfg, now)
        assert hung.verdict is Verdict.FAIL and "pgrep" in (hung.fix or "")
    finally:
        holder.kill()
        holder.wait()


# -- cron, against the real crontab program -----------------------------------------------


@pytest.fixture
def crontab() -> Iterator[list[str]]:
    """The real user crontab, emptied for the test and put back as it was afterwards.

    It is the user's, not the test's: one test at a time holds it, across the parallel
    workers of a run and any other run on this machine (a file lock in the temp dir).
    """
    if CRONTAB is None:
        pytest.fail("CI must have a crontab program: .ci/run installs cron")
    with FileLock(os.path.join(tempfile.gettempdir(), "looop-tests-crontab.lock")):
        before = cron.read_table()
        try:
            yield before
        finally:
            cron.write_table(before)


OTHERS = ["# the user's own lines", "MAILTO=ops@example.org", "17 3 * * * /usr/bin/backup --all"]


@needs_crontab
def test_cron_install_and_remove_leave_other_lines_alone(wd: Paths, crontab: Any) -> None:
    cron.write_table(OTHERS)
    assert cron.status(wd).installed is None
    entry = cron.install(wd)
    assert entry.up_to_date and entry.line.startswith("* * * * * /")
    assert f"-C {wd.root} pulse" in entry.line
    listed = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True)
    assert listed.stdout.splitlines() == [*OTHERS, entry.line]
    cron.install(wd)  # twice: still one line
    assert cron.read_table() == [*OTHERS, entry.line]
    assert cron.remove(wd).installed is None
    listed = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True)
    assert listed.stdout.splitlines() == OTHERS


@needs_crontab
def test_cron_cli_asks_unless_yes_and_doctor_sees_the_line(wd: Paths, crontab: Any) -> None:
    cron.write_table(OTHERS)
    refused = run_looop("-C", str(wd.root), "cron", "install")  # stdin is not a terminal
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert cron.status(wd).installed is None
    warned = by_name(doctor.diagnose(wd, offline=True))["schedule"]
    assert warned.verdict is Verdict.WARN and "cron install" in (warned.fix or "")
    done = run_looop("-C", str(wd.root), "cron", "install", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert jsonio.loads(done.stdout)["up_to_date"] is True
    shown = run_looop("-C", str(wd.root), "cron", "show")
    assert "installed:" in shown.stdout and str(wd.root) in shown.stdout
    assert by_name(doctor.diagnose(wd, offline=True))["schedule"].verdict is Verdict.OK
    journal.emit(open_wd(wd), "beat", time.time() - 3600, outcome="skipped")
    stale = by_name(doctor.diagnose(wd, offline=True))["schedule"]
    assert stale.verdict is Verdict.FAIL and "60 min ago" in stale.message
    removed = run_looop("-C", str(wd.root), "cron", "remove", "--yes")
    assert removed.returncode == 0 and cron.read_table() == OTHERS


def test_prices_check_says_what_an_unknown_price_does(wd: Paths) -> None:
    def check(toml: str) -> doctor.Check:
        wd.config.write_text(toml)
        return doctor.pricing(config_mod.load(wd.config))

    assert "no daily_usd" in check("").message
    priced = check('[decider]\nbackend = "command"\ncommand = "llm -u"\n[limits]\ndaily_usd = 1\n')
    assert priced.verdict is Verdict.OK
    custom = (
        '[decider]\nbackend = "command"\ncommand = "ollama run x"\n'
        '[workers]\ndefault_runtime = "mine"\n'
        '[runtimes.mine]\ncommand = "mine {{prompt_file}}"\nusage = "codex"\n'
        "[limits]\ndaily_usd = 1\n"
    )
    held = check(custom)
    assert held.verdict is Verdict.WARN and "no price for decider (ollama)" in held.message
    assert "daily_usd holds every loop" in held.message and "runtime mine" not in held.message
    worst = check(custom + "unpriced_usd_per_mtok = 60\n")
    assert "worst case, $60 per million tokens" in worst.message
