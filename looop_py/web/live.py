"""What tells open pages that the work dir changed: one watcher per server, not per page.

The watcher stats a handful of paths every POLL_S (the event log, the journal,
the asks, answers, rounds, goals, sensors and snapshots directories, and each
worker's directory and output.log) and, when any stamp moved, hands the names
of what changed to every subscriber's queue. Nobody subscribed: it stops. A
page (web/static.py's script) listens on /live (Server-Sent Events) and fetches
itself again. No web stack here: web/app.py turns the queue into a response.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from looop_py.workdir.paths import Paths

POLL_S = 0.25  # a change reaches an open page well within a second
PING_S = 15.0  # a comment line this often keeps proxies from closing an idle stream

Stamps = dict[str, tuple[int, int]]


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def stamps(paths: Paths) -> Stamps:
    """name → (mtime, size) of everything a page shows; `log:<id>` for a worker's output."""
    out: Stamps = {}
    for name, path in (
        ("events", paths.events),
        ("journal", paths.journal),
        ("asks", paths.asks),
        ("answers", paths.answers),
        ("rounds", paths.rounds),
        ("goals", paths.goals),
        ("sensors", paths.sensors),
        ("snapshots", paths.snapshots),
        ("sessions", paths.sessions),
    ):
        got = _stamp(path)
        if got is not None:
            out[name] = got
    with contextlib.suppress(OSError), os.scandir(paths.sessions) as it:
        for entry in it:
            if entry.is_dir(follow_symlinks=False):
                got = _stamp(Path(entry.path))
                if got is not None:
                    out[f"worker:{entry.name}"] = got
                log = _stamp(Path(entry.path) / "output.log")
                if log is not None:
                    out[f"log:{entry.name}"] = log
    return out


def changed(before: Stamps, after: Stamps) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


class Watcher:
    """One polling task shared by every open page of this server."""

    def __init__(self, paths: Paths, poll_s: float = POLL_S) -> None:
        self.paths = paths
        self.poll_s = poll_s
        self.queues: set[asyncio.Queue[list[str]]] = set()
        self.task: asyncio.Task[None] | None = None

    def subscribe(self) -> asyncio.Queue[list[str]]:
        queue: asyncio.Queue[list[str]] = asyncio.Queue(maxsize=8)
        self.queues.add(queue)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())
        return queue

    def unsubscribe(self, queue: asyncio.Queue[list[str]]) -> None:
        self.queues.discard(queue)

    async def _run(self) -> None:
        last = await asyncio.to_thread(stamps, self.paths)
        while self.queues:
            await asyncio.sleep(self.poll_s)
            now = await asyncio.to_thread(stamps, self.paths)
            moved = changed(last, now)
            last = now
            if moved:
                for queue in list(self.queues):
                    if queue.full():  # a stalled page: it only needs to know "something"
                        with contextlib.suppress(asyncio.QueueEmpty):
                            queue.get_nowait()
                    queue.put_nowait(moved)


def message(moved: list[str]) -> bytes:
    """One Server-Sent Event naming what changed."""
    return f"event: change\ndata: {' '.join(moved)}\n\n".encode()
