"""An agent whose model never stops calling tools is stopped at its iteration cap.

Each real CLI talks to a fake model that answers every request with one more shell
call. looop counts the tool calls in the CLI's stream and ends the worker's process
group past the cap: the model server sees only the cap's requests (and the one that
asked for more), the worker's result says `blocked: iteration cap N reached`, and the
usage the CLI reported up to then is still recorded.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from looop_py.workers import records
from tests.agents.test_runtimes import run_worker
from tests.fakemodel import FakeModel, Turn

pytestmark = [pytest.mark.agents, pytest.mark.slow, pytest.mark.timeout(180)]

CAP = 3
FOREVER = [Turn(shell="echo again") for _ in range(60)]  # a model that never stops


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
def test_a_model_that_never_stops_calling_tools_is_stopped_at_the_cap(
    cli: str, wd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.monotonic()
    with FakeModel(script=FOREVER) as model:
        status, result = run_worker(
            wd, cli, model, tmp_path / "home", monkeypatch, max_iters=CAP, exit_ok=False
        )
        requests = len(model.posts)
    took = time.monotonic() - started
    assert result["status"] == "blocked", result
    assert result["summary"] == f"iteration cap {CAP} reached"
    assert status.get("stopped") == f"iteration cap {CAP} reached"
    # CAP tool calls ran; the request that asked for one more is the last (a CLI may
    # have sent the next before its group was ended). Without the cap: 60.
    assert CAP + 1 <= requests <= CAP + 2, requests
    # What it spent up to the cap is still charged, as far as its stream tells:
    if cli == "pi":  # every assistant message carries its usage
        assert result["usage"]["input_tokens"] >= CAP * 120
        assert result["usage"]["output_tokens"] >= CAP * 30
    elif cli == "claude":  # each API message's usage, as its first event gave it (output
        # tokens only as counted when the message started: the final count is in `result`)
        assert result["usage"]["input_tokens"] >= CAP * 120
        assert result["usage"]["output_tokens"] > 0
    else:  # codex exec --json tells usage only when its turn ends: it never did
        assert "usage" not in result
    meta = records.read_record(wd.sessions / "w1" / records.META)  # type: ignore[attr-defined]
    if cli == "claude":  # its own flag too: one turn more than the tool calls allowed
        assert f"--max-turns {CAP + 1}" in meta["command"]
    assert took < 120


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
def test_an_uncapped_worker_records_its_tool_calls_as_iters(
    cli: str, wd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report's `maker: Done in N iters` (the crate's line) needs N: the supervisor
    counts the tool calls of a worker that ended on its own, as it does under a cap."""
    from tests.agents.test_runtimes import DONE

    script = [Turn(shell="echo one"), Turn(shell="echo two"), Turn(shell=DONE), Turn(text="ok")]
    with FakeModel(script=script) as model:
        _, result = run_worker(wd, cli, model, tmp_path / "home", monkeypatch)
    assert result["status"] == "done", result
    assert result["iters"] == 3, result  # two echoes and the `looop done` call


def test_a_shell_worker_reads_its_cap_from_the_environment(
    wd: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from looop_py.workers import launch
    from tests.conftest import open_wd, wait_for

    launch.start(
        open_wd(wd),  # type: ignore[arg-type]
        "w1",
        'echo "cap=$LOOOP_MAX_ITERS" > cap.txt',
        runtime="shell",
        cwd=tmp_path,
        max_iters=7,
        now=time.time(),
    )
    wait_for((tmp_path / "cap.txt").exists, timeout=20, what="the shell worker")
    assert (tmp_path / "cap.txt").read_text().strip() == "cap=7"
