from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from looop_py import jsonio
from looop_py.coord.choose import open_workdir
from looop_py.workdir.context import Clock, WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init
from tests import leftovers

# CI decides whether a submission lands, so its property tests check the same examples on
# every run: a case found by exploring fails the run that found it, not a later, unrelated
# one. Runs elsewhere explore afresh and keep what failed in .hypothesis/ to replay it.
if os.environ.get("CI"):
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
    settings.load_profile("ci")


def write_sensor(paths: Paths, name: str, body: str, *, mode: int = 0o755) -> Path:
    """A sensor script; `body` is bash unless it starts with its own #! line."""
    path = paths.sensors / f"{name}.sh"
    text = body if body.startswith("#!") else "#!/usr/bin/env bash\n" + body
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def wd(tmp_path: Path) -> Paths:
    """A fresh work dir with the starter files, no starter sensors, the noop decider."""
    result = init(tmp_path / "wd")
    for script in (result.root / "sensors").glob("*.sh"):
        script.unlink()
    # The foundation tests watch sensing and hashing; deciding is tested on its own.
    (result.root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
    return Paths(result.root)


# The work dirs a test opened, by root and clock: reused while looop.toml is unchanged (a
# test that edits it between two calls gets a fresh one, as two commands would), all closed
# when the test ends (an etcd shelf revokes its lease). A forked child opens its own.
_OPENED: dict[tuple[Path, Clock], tuple[tuple[int, ...], WorkDir]] = {}
_ALL_OPENED: list[WorkDir] = []
os.register_at_fork(after_in_child=_OPENED.clear)


def open_wd(paths: Paths, clock: Clock = time.time) -> WorkDir:
    """The work dir as a door opens it: looop.toml loaded, its shelf opened."""
    stamp = jsonio.file_stamp(paths.config)
    found = _OPENED.get((paths.root, clock))
    if found is not None and found[0] == stamp:
        return found[1]
    opened = open_workdir(paths, clock=clock)
    _OPENED[(paths.root, clock)] = (stamp, opened)
    _ALL_OPENED.append(opened)
    return opened


def close_opened() -> None:
    """Close every work dir the test opened (what a door does when its command ends)."""
    _OPENED.clear()
    while _ALL_OPENED:
        _ALL_OPENED.pop().close()


@pytest.fixture(scope="session", autouse=True)
def _no_process_outlives_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Fails the session if a process a test started is still running after its last test.

    It is set up before any other session fixture, so it is torn down after them all (the
    etcd server and the other servers the tests start have been stopped by then).
    """
    base = tmp_path_factory.getbasetemp()
    yield
    killed = leftovers.reap(base, grace_s=10.0)
    if killed:
        pytest.fail("processes left running by the tests (now killed):\n" + "\n".join(killed))


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """With LOOOP_TEST_LEAKS=1 (an audit, not CI: a process scan per test), each test fails
    that leaves a process running in its own tmp_path: the session's guard above names only
    what was still running at the end of the run, this names the test that left it."""
    if not os.environ.get("LOOOP_TEST_LEAKS"):
        yield
        return
    base = request.getfixturevalue("tmp_path")
    yield
    killed = leftovers.reap(base, grace_s=2.0)
    if killed:
        pytest.fail("processes this test left running (now killed):\n" + "\n".join(killed))


@pytest.fixture(autouse=True)
def _close_opened_workdirs() -> Iterator[None]:
    yield
    close_opened()


def run_looop(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a child process, as cron or a user would."""
    full_env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "looop_py", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )


class _Left(Exception):
    """console.leave, which ends the process with os._exit, called in this process."""

    def __init__(self, code: int) -> None:
        self.code = code


def _leave(code: int) -> None:
    raise _Left(code)


def invoke_looop(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`run_looop` in this process: the same door (console.main: the plain pulse and claim
    lines without click, the rest through the click group), the same environment and
    exit codes, no interpreter start-up. For tests of what a command does, not of the
    process it runs in (signals, start-up, locks or crashes across processes keep
    `run_looop`)."""
    from looop_py import console

    overrides: dict[str, str | None] = {"LOOOP_DIR": None, **(env or {})}
    here, argv, leave = os.getcwd(), sys.argv, console.leave
    code = 0
    with CliRunner().isolation(input=input, env=overrides) as (out, err, _):
        # `python -m looop_py` runs with argv[0] = the path of looop_py/__main__.py.
        sys.argv = [str(Path(console.__file__).with_name("__main__.py")), *args]
        console.leave = _leave
        try:
            if cwd is not None:
                os.chdir(cwd)
            console.main()
        except _Left as left:
            code = left.code
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
            if isinstance(exit_.code, str):
                print(exit_.code, file=sys.stderr)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            console.leave, sys.argv = leave, argv
            os.chdir(here)
        stdout, stderr = out.getvalue(), err.getvalue()
    return subprocess.CompletedProcess(
        ["looop", *args],
        code,
        stdout.decode("utf-8"),
        stderr.decode("utf-8"),
    )


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    what: str | Callable[[], object] = "it",
    *,
    interval: float = 0.02,
) -> None:
    """Poll until `predicate()` is truthy, `interval` apart; fail the test after `timeout` s.

    Every test that waits for something waits through this. `what` names what was awaited
    in the failure; a callable is asked then (to show the state seen). A predicate may act
    (run a beat, try a claim) and may assert, to fail at once when waiting is hopeless.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            pytest.fail(f"timed out after {timeout} s waiting for {said}")
        time.sleep(interval)
