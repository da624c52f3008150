"""The CLI as users and cron meet it: work dir discovery, init, output, exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from looop_py import jsonio
from looop_py.cli.app import cli
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, write_sensor


def test_outside_a_work_dir_every_command_says_how_to_fix_it(tmp_path: Path) -> None:
    for cmd in (["pulse"], ["sense"], ["status"], ["why"], ["journal"]):
        r = invoke_looop(*cmd, cwd=tmp_path)
        assert r.returncode == 2, (cmd, r.stderr)
        assert "not inside a looop work dir" in r.stderr
        assert "looop init" in r.stderr
        assert "Traceback" not in r.stderr


def test_work_dir_from_flag_env_and_ancestor(wd: Paths, tmp_path: Path) -> None:
    nested = wd.root / "goals" / "archive"
    assert invoke_looop("status", "--json", cwd=nested).returncode == 0
    by_env = invoke_looop("status", "--json", cwd=tmp_path, env={"LOOOP_DIR": str(wd.root)})
    assert jsonio.loads(by_env.stdout)["work_dir"] == str(wd.root)
    by_flag = invoke_looop("-C", str(wd.root), "status", "--json", cwd=tmp_path)
    assert jsonio.loads(by_flag.stdout)["work_dir"] == str(wd.root)
    bad = invoke_looop("-C", str(tmp_path), "status", cwd=tmp_path)
    assert bad.returncode == 2 and "is not a looop work dir" in bad.stderr


def test_init_creates_layout_and_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "ops"
    first = invoke_looop("init", str(target))
    assert first.returncode == 0, first.stderr
    for rel in (
        "looop.toml",
        "PLAYBOOK.md",
        "goals/welcome.md",
        "sensors/date.sh",
        "sensors/disk.sh",
        "sensors/git.sh",
        "goals/archive",
        "snapshots",
        "claims",
        "sessions",
        "rounds",
        "memory",
        "asks",
        "answers",
        "reports",
        "state",
        "runs",
    ):
        assert (target / rel).exists(), rel
    assert os.access(target / "sensors" / "date.sh", os.X_OK)
    assert "created looop.toml" in first.stdout
    (target / "PLAYBOOK.md").write_text("mine\n")
    (target / "sensors" / "git.sh").unlink()
    second = invoke_looop("init", str(target), "--json")
    report = jsonio.loads(second.stdout)
    assert report["created"] == ["sensors/git.sh"]
    assert (target / "PLAYBOOK.md").read_text() == "mine\n"
    third = invoke_looop("init", str(target))
    assert "nothing to do" in third.stdout


def test_starter_sensors_run_offline_and_read_ok(tmp_path: Path) -> None:
    target = tmp_path / "ops"
    invoke_looop("init", str(target))
    r = invoke_looop("-C", str(target), "pulse", "--json")
    assert r.returncode == 0, r.stderr
    beat = jsonio.loads(r.stdout)
    assert beat["outcome"] == "decided"
    assert {n: s["status"] for n, s in beat["sensors"].items()} == {
        "date": "ok",
        "disk": "ok",
        "git": "ok",
    }
    snaps = target / "snapshots"
    assert jsonio.read_json(snaps / "sensor-disk.json")["signal"]["disk"] in (
        "ok",
        "low",
        "critical",
    )
    assert "date" in jsonio.read_json(snaps / "sensor-date.json")["signal"]


def test_pulse_is_silent_when_skipped_and_not_a_tty(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    first = invoke_looop("-C", str(wd.root), "pulse")
    assert first.stdout.startswith("✓ nothing to do") and "sensor s appeared" in first.stdout
    quiet = invoke_looop("-C", str(wd.root), "pulse")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    verbose = invoke_looop("-C", str(wd.root), "pulse", "-v")
    assert "skipped" in verbose.stdout and "sensor-s" in verbose.stderr
    assert invoke_looop("-C", str(wd.root), "pulse", "-q", "--force").stdout == ""


def test_pulse_json_shape(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    write_sensor(wd, "bad", "exit 4")
    beat = jsonio.loads(invoke_looop("-C", str(wd.root), "pulse", "--json").stdout)
    assert set(beat) >= {"outcome", "world_hash", "changed", "sensors", "ms"}
    assert beat["world_hash"].startswith("xxh3:") and len(beat["world_hash"]) == 37
    assert beat["sensors"]["s"]["status"] == "ok"
    assert beat["sensors"]["bad"] == {
        "status": "failed",
        "ms": beat["sensors"]["bad"]["ms"],
        "error": 4,
    }
    assert {"item", "old", "new"} == set(beat["changed"][0])


def test_sense_previews_without_committing(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    view = jsonio.loads(invoke_looop("-C", str(wd.root), "sense", "--json").stdout)
    assert view["would_wake"] and view["committed_hash"] is None
    assert view["snapshots"]["sensor-s"] == {"signal": 1, "detail": {}}
    assert not wd.last_world.exists() and not wd.journal.exists()
    beat = jsonio.loads(invoke_looop("-C", str(wd.root), "pulse", "--json").stdout)
    assert beat["outcome"] == "decided"
    text = invoke_looop("-C", str(wd.root), "sense").stdout
    assert "would skip" in text


def test_status_why_and_journal(wd: Paths) -> None:
    flag = wd.root / "flag"
    flag.write_text("red")
    write_sensor(wd, "light", f"cat {flag}")
    write_sensor(wd, "broken", "exit 1")
    invoke_looop("-C", str(wd.root), "pulse")
    status = jsonio.loads(invoke_looop("-C", str(wd.root), "status", "--json").stdout)
    assert status["last_beat"]["outcome"] == "decided"
    assert status["sensors"] == {"ok": ["light"], "failed": ["broken"]}
    assert status["counts"] == {"goals": 1, "sessions": 0, "claims": 0}
    assert status["world_hash"].startswith("xxh3:")

    invoke_looop("-C", str(wd.root), "pulse")
    why = jsonio.loads(invoke_looop("-C", str(wd.root), "why", "--json").stdout)
    assert why["outcome"] == "skipped" and why["changed"] == []

    flag.write_text("green")
    invoke_looop("-C", str(wd.root), "pulse")
    why_text = invoke_looop("-C", str(wd.root), "why").stdout
    assert 'snap:sensor-light: "red" → "green"' in why_text

    lines = invoke_looop("-C", str(wd.root), "journal", "-n", "1").stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("- ")
    assert (
        len(jsonio.loads(invoke_looop("-C", str(wd.root), "journal", "--json").stdout)["lines"])
        == 2
    )


def test_a_held_beat_and_sensor_health_each_print_on_lines_of_their_own(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "noop"\n[limits]\ndecides_per_hour = 1\n')
    write_sensor(wd, "n", "date +%s%N")  # changes every beat: each one wakes
    runner = CliRunner()
    assert runner.invoke(cli, ["-C", str(wd.root), "pulse"]).exit_code == 0  # the hour's decide
    pulse = runner.invoke(cli, ["-C", str(wd.root), "pulse", "-v"])
    lines = pulse.output.splitlines()
    assert pulse.output.endswith("\n") and len(lines) == 2, pulse.output
    assert lines[0].split()[:2] == ["ok", "sensor-n"]
    assert lines[1].startswith("· held: decide cap: 1 decides in the last hour (limit 1) (")
    status = runner.invoke(cli, ["-C", str(wd.root), "status"])
    lines = status.output.splitlines()
    assert status.exit_code == 0 and status.output.endswith("\n"), status.output
    assert "sensors     1 ok, 0 failed" in lines
    held = "held        the decider will not be called now: decide cap: 1 decides in the last hour"
    assert lines[-1] == held + " (limit 1)", status.output


def test_why_before_any_beat(wd: Paths) -> None:
    assert "no beat has run yet" in invoke_looop("-C", str(wd.root), "why").stdout


def test_bad_config_is_a_clear_usage_error(wd: Paths) -> None:
    wd.config.write_text("[sensors]\ntimeout_s = 'soon'\n")
    r = invoke_looop("-C", str(wd.root), "pulse")
    assert r.returncode == 2 and "sensors.timeout_s should be float" in r.stderr
    wd.config.write_text("[sensors]\ntimout_s = 5\n")
    r = invoke_looop("-C", str(wd.root), "pulse")
    assert "unknown key sensors.timout_s" in r.stderr and "timeout_s" in r.stderr
    wd.config.write_text("[sensors\n")
    r = invoke_looop("-C", str(wd.root), "pulse")
    assert r.returncode == 2 and "looop.toml" in r.stderr


def test_a_corrupt_last_world_is_a_cache_rebuilt_by_the_next_decide(wd: Paths) -> None:
    """Issue 10: a torn state/last-world.json used to fail every pulse (a crash loop)."""
    wd.last_world.write_text("{ torn")
    r = invoke_looop("-C", str(wd.root), "pulse", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["outcome"] == "decided", r.stderr
    assert json.loads(wd.last_world.read_text())["hash"].startswith("xxh3:")


def test_a_bug_goes_to_the_error_log_not_a_traceback(
    wd: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looop_py.beat import views as report

    def boom(paths: Paths) -> dict[str, object]:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(report, "status", boom)
    result = CliRunner().invoke(cli, ["-C", str(wd.root), "status"])
    assert result.exit_code == 70
    assert "Traceback" not in result.output
    assert "kaboom" in wd.error_log.read_text()


def _commands() -> list[str]:
    return sorted(cli.commands)


@pytest.mark.parametrize("name", _commands())
def test_every_command_has_help_with_an_example(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0
    assert "Example" in result.output, name


def test_top_level_help_and_version() -> None:
    assert "looop init" in CliRunner().invoke(cli, ["--help"]).output
    assert CliRunner().invoke(cli, ["--version"]).exit_code == 0
