"""The click-free door to `looop pulse` must behave exactly like the click one."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from looop_py import jsonio
from looop_py.cli.app import cli
from looop_py.console import parse_plain_pulse
from looop_py.workdir.paths import Paths
from tests.conftest import run_looop, write_sensor


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["pulse"], {"workdir": None}),
        (["-C", "d", "pulse", "--json", "-q"], {"workdir": "d", "as_json": True, "quiet": True}),
        (["--dir=d", "pulse", "--force", "-v"], {"workdir": "d", "force": True, "verbose": True}),
        (
            ["--dir", "d", "pulse", "--verbose", "--quiet"],
            {"workdir": "d", "verbose": True, "quiet": True},
        ),
    ],
)
def test_plain_pulse_forms(argv: list[str], expected: dict[str, object]) -> None:
    opts = parse_plain_pulse(argv)
    assert opts is not None
    base = {"as_json": False, "force": False, "verbose": False, "quiet": False}
    assert opts == {**base, **expected}


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["status"],
        ["pulse", "--help"],
        ["pulse", "-vq"],
        ["pulse", "extra"],
        ["-C"],
        ["-C", "d"],
        ["--version"],
        ["pulse", "--json=1"],
    ],
)
def test_everything_else_goes_to_click(argv: list[str]) -> None:
    assert parse_plain_pulse(argv) is None


def test_both_doors_give_the_same_beat(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    fast = run_looop("-C", str(wd.root), "pulse", "--json", "--force")
    slow = CliRunner().invoke(cli, ["-C", str(wd.root), "pulse", "--json", "--force"])
    a, b = jsonio.loads(fast.stdout), jsonio.loads(slow.output)
    assert a.keys() == b.keys()
    assert (a["outcome"], a["world_hash"], a["forced"]) == (b["outcome"], b["world_hash"], True)
    assert a["sensors"].keys() == b["sensors"].keys()
    combined = CliRunner().invoke(cli, ["-C", str(wd.root), "pulse", "-vq"])
    assert combined.exit_code == 0 and combined.output == ""
