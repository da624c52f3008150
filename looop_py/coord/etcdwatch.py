"""An etcd watch on the records other hosts write: how `looop up` hears an answer at once.

On etcd, the asks, answers and approvals are keys every host writes
(coord/etcdshelf.py). `looop up` asked for their names once a second: three
range reads a second from every idle host, and up to a second before another
host's answer was acted on. A watch is one request whose reply never ends: etcd
pushes each change to those keys the moment it commits, so an answer given on
another host starts a beat here within milliseconds, and an idle `up` sends
nothing.

The stream is read in a thread that does one thing with what it reads: call
`on_change` (ops/watch.py's `notify`, which ends the resident pulse's wait).
When the stream breaks — its member went down, the connection was reset, a line
was not a watch response — it is opened again on the next endpoint after a
backoff (BACKOFF_S doubling to BACKOFF_MAX_S; reset once a stream is open), from
the revision after the last one it saw, so nothing written meanwhile is missed.
When etcd has compacted that revision away, the gap counts as one change: the
beat reads the records anyway. A stream silent for IDLE_S is reopened the same
way, so a connection that died without a word (a partition) is noticed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable
from typing import Any

from looop_py.coord.etcd import Client, _b64, unb64
from looop_py.coord.wire import Connection
from looop_py.errors import LooopError

BACKOFF_S = 0.2
BACKOFF_MAX_S = 5.0
IDLE_S = 300.0  # etcd sends nothing on a quiet watch: reopen it after this long


def key_range(prefixes: Iterable[str]) -> tuple[str, str]:
    """The one key range [start, end) that holds every key under each prefix."""
    found = sorted(prefixes)
    last = found[-1].encode()
    return found[0], (last[:-1] + bytes([last[-1] + 1])).decode()


class RecordWatch:
    """Calls `on_change` from its own thread whenever a key under one of `prefixes`
    is put or deleted, until `close()`."""

    def __init__(
        self,
        client: Client,
        prefixes: Iterable[str],
        on_change: Callable[[], None],
        *,
        idle_s: float = IDLE_S,
        backoff_s: float = BACKOFF_S,
    ) -> None:
        self.client = client
        self.prefixes = tuple(prefixes)
        self.on_change = on_change
        self.idle_s = idle_s
        self.backoff_s = backoff_s
        self.opened = 0  # streams opened (the first, and each reopening)
        self.failures: list[str] = []  # why each stream ended, the last few
        self.ready = threading.Event()  # the first stream is open, or its first try failed
        self._stop = threading.Event()
        self._conn: Connection | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="looop-etcd-watch", daemon=True)

    def start(self) -> RecordWatch:
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop: the stream's connection is closed, which ends the thread's read."""
        self._stop.set()
        with self._lock:
            conn = self._conn
        if conn is not None:
            conn.close()
        self._thread.join(timeout=5)

    def _keep(self, conn: Connection) -> None:
        with self._lock:
            self._conn = conn
        if self._stop.is_set():  # closed while this one was being opened
            conn.close()

    def _run(self) -> None:
        start, end = key_range(self.prefixes)
        after = 0  # the last revision seen; 0 until the first stream says where it starts
        attempt, backoff = 0, self.backoff_s
        while not self._stop.is_set():
            request = {"key": _b64(start), "range_end": _b64(end), "prev_kv": False}
            if after:
                request["start_revision"] = after + 1
            try:
                for result in self.client.watch(
                    {"create_request": request},
                    attempt=attempt,
                    idle_s=self.idle_s,
                    opened=self._keep,
                ):
                    if result.get("created"):
                        self.ready.set()
                        self.opened += 1
                        backoff = self.backoff_s
                        if not after:  # what was written before this is what a beat reads
                            after = int(result.get("header", {}).get("revision", 0))
                    if result.get("compact_revision"):
                        after = 0  # the gap was compacted away: read from now on
                        self.on_change()
                        break
                    if result.get("canceled"):
                        raise LooopError(f"etcd canceled the watch: {result.get('cancel_reason')}")
                    events = result.get("events") or ()
                    if self._matters(events):
                        self.on_change()
                    after = max([after, *(_revision(e) for e in events)])
                else:
                    raise LooopError("the watch stream ended")
            except LooopError as exc:
                if self._stop.is_set():
                    return
                self.failures = [*self.failures[-4:], exc.message]
                self.ready.set()
                attempt += 1  # the next endpoint
                self._stop.wait(backoff)
                backoff = min(backoff * 2, max(BACKOFF_MAX_S, self.backoff_s))

    def _matters(self, events: Iterable[dict[str, Any]]) -> bool:
        for event in events:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                if unb64(event["kv"]["key"]).decode().startswith(self.prefixes):
                    return True
        return False


def _revision(event: dict[str, Any]) -> int:
    """The revision an event happened at (a delete's kv carries it too); 0 if unsaid."""
    try:
        return int(event["kv"]["mod_revision"])
    except (KeyError, TypeError, ValueError):
        return 0
