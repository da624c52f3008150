"""Live pages: /live pushes a change within a second of a pulse in another process, through
the same auth; one watcher serves every open page."""

from __future__ import annotations

import asyncio
import http.client
import socket
import time

import pytest

pytest.importorskip("starlette")

from looop_py.web import live
from looop_py.workdir.paths import Paths
from tests.conftest import run_looop, write_sensor
from tests.web.conftest import Served

pytestmark = pytest.mark.timeout(60)


def _stream(served: Served, headers: dict[str, str]) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    conn.request("GET", "/live", headers={"Host": f"127.0.0.1:{served.port}", **headers})
    return conn.getresponse()


def _next_change(resp: http.client.HTTPResponse, deadline: float, want: str) -> str:
    """The next change event naming `want` (a beat may be seen mid-way: snapshots first)."""
    while time.monotonic() < deadline:
        line = resp.readline().decode()
        if line.startswith("data: ") and want in line[6:].split():
            return line[6:].strip()
    raise AssertionError(f"no change event naming {want}")


def test_live_needs_the_same_auth_and_host_as_every_page(wd: Paths, served: Served) -> None:
    assert _stream(served, {}).status == 401
    assert _stream(served, {"Cookie": f"looop_session_{served.port}=forged"}).status == 401
    bad_host = {"Authorization": f"Bearer {served.token}", "Host": "evil.example"}
    assert _stream(served, bad_host).status == 403


def test_a_pulse_in_another_process_reaches_an_open_stream_within_a_second(
    wd: Paths, served: Served
) -> None:
    write_sensor(wd, "n", "echo 1")
    resp = _stream(served, {"Authorization": f"bearer {served.token}"})
    assert resp.status == 200 and resp.headers["content-type"].startswith("text/event-stream")
    assert resp.readline().startswith(b"retry:")  # the stream is open
    r = run_looop("-C", str(wd.root), "pulse", "--force")
    assert r.returncode == 0, r.stderr
    ended = time.monotonic()
    moved = _next_change(resp, ended + 5, "events")
    latency = time.monotonic() - ended
    print(f"pulse → change event: {latency:.3f} s ({moved})")
    assert latency < 1.0
    ask = run_looop("-C", str(wd.root), "ask", "--prompt", "ok?", "--timeout", "0.1")
    assert ask.returncode == 4
    assert "asks" in _next_change(resp, time.monotonic() + 5, "asks")


def test_one_watcher_serves_many_pages_and_stops_when_none_is_open(wd: Paths) -> None:
    async def scenario() -> tuple[int, bool, list[str], list[str]]:
        watcher = live.Watcher(wd, poll_s=0.05)
        queues = [watcher.subscribe() for _ in range(20)]
        task = watcher.task
        assert task is not None
        await asyncio.sleep(0.1)
        (wd.root / "journal.md").write_text("- a line\n")
        got = [await asyncio.wait_for(q.get(), 2) for q in queues[:2]]
        for q in queues:
            watcher.unsubscribe(q)
        await asyncio.wait_for(task, 2)  # no page open: the watcher ends
        return sum(1 for t in asyncio.all_tasks() if t is task), task.done(), got[0], got[1]

    running, done, first, second = asyncio.run(scenario())
    assert done and running == 0 and first == second == ["journal"]


def test_a_stalled_page_cannot_grow_the_servers_memory(wd: Paths) -> None:
    async def scenario() -> int:
        watcher = live.Watcher(wd, poll_s=0.01)
        stalled = watcher.subscribe()
        for i in range(40):
            (wd.root / "journal.md").write_text(f"- {i}\n" * (i + 1))
            await asyncio.sleep(0.03)
        watcher.unsubscribe(stalled)
        return stalled.qsize()

    assert asyncio.run(scenario()) <= 8


def test_the_server_stops_promptly_with_a_page_open(wd: Paths) -> None:
    from tests.web import conftest

    proc, other = conftest.start(wd)
    resp = _stream(other, {"Authorization": f"Bearer {other.token}"})
    assert resp.status == 200
    started = time.monotonic()
    conftest.stop(proc)
    assert time.monotonic() - started < 5
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", other.port)) != 0


def test_an_answer_and_a_worker_ending_reach_an_open_stream(wd: Paths, served: Served) -> None:
    from looop_py.workers import records
    from tests.conftest import open_wd

    resp = _stream(served, {"Authorization": f"Bearer {served.token}"})
    assert resp.readline().startswith(b"retry:")
    ask = run_looop("-C", str(wd.root), "ask", "--prompt", "ok?", "--timeout", "0.1")
    assert ask.returncode == 4
    _next_change(resp, time.monotonic() + 5, "asks")
    r = run_looop("-C", str(wd.root), "answer", "human-1", "yes")
    assert r.returncode == 0, r.stderr
    answered = time.monotonic()
    _next_change(resp, answered + 5, "answers")
    assert time.monotonic() - answered < 1.0
    r = run_looop("-C", str(wd.root), "worker", "start", "quick", "-", input="sleep 0.3\n")
    assert r.returncode == 0, r.stderr

    def ended() -> bool:
        return any(v.id == "quick" and not v.alive for v in records.list_sessions(open_wd(wd), 0))

    deadline = time.monotonic() + 15
    while True:  # every change to its directory is told; one of them is its ending
        _next_change(resp, deadline, "worker:quick")
        if ended():
            break
