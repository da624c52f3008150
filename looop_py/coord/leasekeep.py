"""A holder process's lease on etcd, kept by a detached keeper process (coord/keeper.py).

`spawn` starts the keeper; `keep` is its loop: refresh the lease every third of its TTL
while the holder lives (and `linger_s` after), revoke it as soon as the holder is gone
(within POLL_S), give up once etcd has been out of reach for longer than the TTL.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

from looop_py import identity
from looop_py.coord.etcd import Client
from looop_py.errors import Unavailable

POLL_S = 0.1  # how often a keeper looks at its holder


def spawn(root: Path, host: str, *, lease: int, pid: int, created: float, linger_s: float) -> None:
    """Start the keeper detached, through a shell that backgrounds it and returns at once,
    so no process of ours is left to reap it (the beat and tests live long)."""
    code = "import sys; from looop_py.coord.keeper import main; sys.exit(main(sys.argv[1:]))"
    args = [str(root), str(lease), str(pid), repr(created), host, repr(linger_s)]
    keeper = [sys.executable, "-c", code, *args]
    subprocess.run(
        ["/bin/sh", "-c", '"$@" &', "sh", *keeper],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        check=True,
    )


def keep(client: Client, ttl: int, *, lease: int, pid: int, created: float, linger_s: float) -> str:
    """Refresh `lease` while process `pid` lives (and `linger_s` after); revoke it then.
    Returns why it stopped: holder-dead, lease-lost or unreachable."""
    last_ok = time.monotonic()
    due = 0.0
    gone_at: float | None = None
    while True:
        if gone_at is None and not identity.is_alive(pid, created):
            gone_at = time.monotonic()
        if gone_at is not None and time.monotonic() - gone_at >= linger_s:
            with contextlib.suppress(Unavailable):
                client.revoke(lease)
            return "holder-dead"
        if time.monotonic() >= due:
            try:
                if client.refresh(lease)[0] <= 0:
                    return "lease-lost"
                last_ok, due = time.monotonic(), time.monotonic() + ttl / 3
            except Unavailable:
                if time.monotonic() - last_ok > ttl:
                    return "unreachable"  # the lease has lapsed by now
                due = time.monotonic() + 0.5
        time.sleep(POLL_S)
