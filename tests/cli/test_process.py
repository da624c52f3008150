"""The CLI as a real process: closed pipes, the click-free pulse, errors from the fast path."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.workdir.paths import Paths
from tests.conftest import run_looop, write_sensor


def _piped(wd: Paths, looop_args: str, reader: str) -> tuple[int, str]:
    """Run `looop ARGS | READER` in bash; the looop process's exit status and its stderr."""
    looop = f"{shlex.quote(sys.executable)} -m looop_py -C {shlex.quote(str(wd.root))}"
    err = wd.root / "stderr.txt"
    script = f'{looop} {looop_args} 2>{shlex.quote(str(err))} | {reader}; echo "${{PIPESTATUS[0]}}"'
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    done = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    return int(done.stdout.strip().splitlines()[-1]), err.read_text()


@pytest.mark.parametrize("reader", ["head -c1 >/dev/null", "true"])
def test_a_closed_pipe_ends_quietly(wd: Paths, reader: str) -> None:
    # Far more than a pipe buffer holds, so the writer is still writing when the reader goes.
    wd.journal.write_text("".join(f"- line {i} " + "x" * 80 + "\n" for i in range(5000)))
    code, err = _piped(wd, "journal -n 5000", reader)
    assert (code, err) == (0, "")
    code, err = _piped(wd, "journal -n 5000 --json", reader)
    assert (code, err) == (0, "")
    code, err = _piped(wd, "status", "true")
    assert (code, err) == (0, "")
    assert not wd.error_log.exists()


def test_a_closed_pipe_on_the_fast_pulse_path_ends_quietly(wd: Paths) -> None:
    for i in range(40):
        write_sensor(wd, f"s{i}", "echo 1")
    code, err = _piped(wd, "pulse --json --force", "true")
    assert (code, err) == (0, "")
    assert not wd.error_log.exists()


def _loaded_after_plain_pulse(wd: Paths, args: list[str], names: tuple[str, ...]) -> str:
    """Run `looop … ARGS` through the fast path in a child and print which of NAMES it loaded."""
    code = (
        "import os, runpy, sys\n"
        "def stay(code):\n"  # the fast path ends with os._exit; stay to look around
        "    raise SystemExit(code)\n"
        "os._exit = stay\n"
        f"sys.argv = ['looop', '-C', {str(wd.root)!r}, *{args!r}]\n"
        "try:\n"
        "    runpy.run_module('looop_py', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('HEAVY', [m for m in {names!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


def test_plain_pulse_never_imports_click(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    for args in (["pulse"], ["pulse", "-v"], ["pulse", "--json", "--force"]):
        out = _loaded_after_plain_pulse(wd, args, ("click", "looop_py.cli.app"))
        assert "HEAVY []" in out, (args, out)


def test_plain_pulse_never_imports_the_web_stack(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    wd.config.write_text(wd.config.read_text() + '[notify]\ncommand = "true"\n')
    heavy = ("starlette", "uvicorn", "httpx", "looop_py.web", "selenium")
    for args in (["pulse"], ["pulse", "--force"]):
        out = _loaded_after_plain_pulse(wd, args, heavy)
        assert "HEAVY []" in out, (args, out)


def test_the_fast_path_reports_errors_as_json_too(tmp_path: Path) -> None:
    plain = run_looop("-C", str(tmp_path), "pulse")
    wrapped = run_looop("-C", str(tmp_path), "pulse", "--json")
    assert plain.returncode == wrapped.returncode == 2
    assert "is not a looop work dir" in plain.stderr
    error = jsonio.loads(wrapped.stdout)
    assert error["exit_code"] == 2 and "is not a looop work dir" in error["error"]


def test_cli_and_console_import_no_cycle() -> None:
    code = (
        "import sys\n"
        "import looop_py.console\n"
        "assert 'looop_py.cli.app' not in sys.modules and 'click' not in sys.modules\n"
        "import looop_py.cli.app\n"
        "import looop_py.cli.output, looop_py.cli.pulse, looop_py.cli.render\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    cli_dir = Path(__file__).resolve().parents[2] / "looop_py" / "cli"
    for module in cli_dir.glob("*.py"):
        text = module.read_text()
        assert "looop_py.console" not in text and "import console" not in text, module.name


def test_the_fast_path_flushes_before_it_leaves(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    done = run_looop("-C", str(wd.root), "pulse", "--json")
    assert done.returncode == 0 and jsonio.loads(done.stdout)["outcome"] == "decided"
    done = run_looop("-C", str(wd.root), "pulse", "-v")
    assert done.returncode == 0 and done.stdout.strip(), done
