"""One name per field across commands: a sensor in error is `failed`, named without `sensor-`."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from looop_py import jsonio
from looop_py.cli.app import cli
from looop_py.workdir.paths import Paths
from tests.conftest import write_sensor


def test_a_broken_sensor_has_one_name_and_one_word_everywhere(wd: Paths) -> None:
    write_sensor(wd, "light", "echo red")
    write_sensor(wd, "broken", "exit 1")

    def run(*args: str) -> Any:
        result = CliRunner().invoke(cli, ["-C", str(wd.root), *args, "--json"])
        return jsonio.loads(result.stdout)

    sense = run("sense")
    assert sense["failed"] == ["broken"]
    assert sense["sensors"] == {
        "broken": {"status": "failed", "ms": sense["sensors"]["broken"]["ms"]},
        "light": {"status": "ok", "ms": sense["sensors"]["light"]["ms"]},
    }
    beat = run("pulse")
    assert beat["sensors"]["broken"]["status"] == "failed"
    status = run("status")
    assert status["sensors"] == {"ok": ["light"], "failed": ["broken"]}
    text = CliRunner().invoke(cli, ["-C", str(wd.root), "sense"]).stdout
    assert "✗ sensor-broken:" in text and "· sensor-light:" in text
    decider = run("decider", "test")
    assert isinstance(decider["ms"], int) and "latency_ms" not in decider
