"""procs.run_many starts children two ways — posix_spawn in looop's own directory,
Popen anywhere else — and both must behave the same in every way a sensor can tell."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from looop_py import procs


@pytest.fixture(params=["posix_spawn", "popen"])
def where(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory children run in: looop's own (posix_spawn) or another one (Popen)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.chdir(run_dir if request.param == "posix_spawn" else tmp_path)
    calls: list[str] = []
    real_posix, real_popen = procs._posix_spawn, procs._popen
    monkeypatch.setattr(procs, "_posix_spawn", lambda *a: calls.append("posix") or real_posix(*a))
    monkeypatch.setattr(procs, "_popen", lambda *a: calls.append("popen") or real_popen(*a))
    yield run_dir
    assert set(calls) <= {"posix" if request.param == "posix_spawn" else "popen"}


def _sh(
    script: str, where: Path, *, timeout: float = 5, cap: int = 1000, **env: str
) -> procs.Result:
    return procs.run(
        ["bash", "-c", script], cwd=where, env={**os.environ, **env}, timeout_s=timeout, cap=cap
    )


def test_output_exit_codes_and_the_directory(where: Path) -> None:
    res = _sh("echo out; echo err >&2; pwd; exit 3", where)
    assert res.returncode == 3 and res.exit_code == 3
    assert res.stdout == f"out\n{where}\n".encode()
    assert res.stderr_tail == b"err\n"


def test_death_by_signal_and_timeout(where: Path) -> None:
    assert _sh("kill -TERM $$", where).returncode == -15
    started = time.monotonic()
    res = _sh("sleep 30", where, timeout=0.3)
    assert res.timed_out and res.exit_code == procs.RC_TIMEOUT
    assert time.monotonic() - started < 5


def test_the_cap_counts_what_it_does_not_keep(where: Path) -> None:
    res = _sh("head -c 100000 /dev/zero", where, cap=100)
    assert res.stdout_bytes == 100000 and len(res.stdout) == 101


def test_sigpipe_is_at_its_default_in_the_child(where: Path) -> None:
    # Python ignores SIGPIPE, and an ignored signal survives exec: `yes` would spin forever.
    started = time.monotonic()
    res = _sh("yes | head -n 1", where, timeout=10)
    assert res.returncode == 0 and res.stdout == b"y\n"
    assert time.monotonic() - started < 5


def test_each_child_leads_its_own_session(where: Path) -> None:
    res = _sh("ps -o sid= -p $$; echo $$", where)
    sid, pid = res.stdout.split()
    assert sid == pid


def test_the_program_is_found_on_the_childs_path(where: Path, tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "mytool").write_text("#!/bin/sh\necho found\n")
    (tools / "mytool").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    res = procs.run(["mytool"], cwd=where, env=env, timeout_s=5, cap=100)
    assert res.stdout == b"found\n"
    missing = procs.run(["no-such-tool-here"], cwd=where, env=env, timeout_s=5, cap=100)
    assert missing.returncode is None and missing.spawn_errno == errno.ENOENT
    assert missing.exit_code == 127


def test_a_script_without_a_shebang_is_enoexec(where: Path) -> None:
    script = where / "bare.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    res = procs.run([str(script)], cwd=where, env=dict(os.environ), timeout_s=5, cap=100)
    assert res.spawn_errno == errno.ENOEXEC and res.exit_code == 126


def test_stdin_comes_from_the_job_or_dev_null(where: Path) -> None:
    given = where / "in.txt"
    given.write_text("from a file\n")
    env = dict(os.environ)
    res = procs.run(["cat"], cwd=where, env=env, timeout_s=5, cap=100, stdin=given)
    assert res.stdout == b"from a file\n"
    assert procs.run(["cat"], cwd=where, env=env, timeout_s=5, cap=100).stdout == b""


def test_many_at_once_and_no_descriptor_leaks(where: Path) -> None:
    # The descriptors open before, by number: a leak is one that is open after and was not.
    # (Not a count: a thread an earlier test left, a server or a keeper, may close one of its
    # own meanwhile, and an earlier test's unreachable file may be collected.)
    before = set(os.listdir("/proc/self/fd"))
    jobs = [procs.Job(str(i), ["bash", "-c", f"sleep 0.2; echo {i}"], 5, 100) for i in range(8)]
    started = time.monotonic()
    results = procs.run_many(jobs, cwd=where, env=dict(os.environ), concurrency=8)
    assert time.monotonic() - started < 1.5  # concurrent, not 8 × 0.2 s
    assert {k: r.stdout for k, r in results.items()} == {
        str(i): f"{i}\n".encode() for i in range(8)
    }
    assert set(os.listdir("/proc/self/fd")) - before == set()
    assert not procs.RUNNING


# -- work that overlaps the children (the quiet beat surveys while its sensors run) ----


def _gate_jobs(where: Path, n: int) -> tuple[list[procs.Job], Path]:
    """A child that waits until `gate` (a fifo) is opened for writing (5 s at most), and
    n - 1 that do not wait."""
    gate = where / "gate"
    os.mkfifo(gate)
    gated = procs.Job("gated", ["bash", "-c", f"read line < {gate}; echo $line"], 5, 100)
    return [gated, *(procs.Job(f"j{i}", ["true"], 5, 100) for i in range(1, n))], gate


def test_meanwhile_runs_while_the_children_run_not_after(where: Path) -> None:
    """The gated child finishes only if `meanwhile` opens its gate while it still waits:
    called after the children are waited on, it would time out first."""
    jobs, gate = _gate_jobs(where, 3)
    calls: list[set[int]] = []

    def meanwhile() -> None:
        calls.append(set(procs.RUNNING))
        fd = os.open(gate, os.O_WRONLY)  # blocks until the child has it open for reading
        os.write(fd, b"opened\n")
        os.close(fd)

    out = procs.run_many(jobs, cwd=where, env=dict(os.environ), meanwhile=meanwhile)
    assert len(calls) == 1 and len(calls[0]) == 3, "once, with every child started"
    assert out["gated"].stdout == b"opened\n" and not out["gated"].timed_out
    assert not procs.RUNNING


def test_meanwhile_that_raises_leaves_nothing_running(where: Path) -> None:
    jobs, _ = _gate_jobs(where, 2)
    started: set[int] = set()

    def meanwhile() -> None:
        started.update(procs.RUNNING)
        raise RuntimeError("the survey failed")

    with pytest.raises(RuntimeError, match="survey failed"):
        procs.run_many(jobs, cwd=where, env=dict(os.environ), meanwhile=meanwhile)
    assert len(started) == 2 and not procs.RUNNING
    for pgid in started:  # each group was killed and reaped: no such process any more
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)


def test_meanwhile_is_called_once_with_no_child_at_all(where: Path) -> None:
    calls: list[int] = []
    assert procs.run_many([], cwd=where, env={}, meanwhile=lambda: calls.append(1)) == {}
    missing = procs.Job("gone", [str(where / "no-such-program")], 5, 100)
    out = procs.run_many([missing], cwd=where, env={}, meanwhile=lambda: calls.append(2))
    assert out["gone"].spawn_errno == errno.ENOENT
    assert calls == [1, 2]
