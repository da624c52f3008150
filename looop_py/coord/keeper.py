"""A lease keeper: keeps one holder process's etcd lease alive while that process lives.

`looop claim` on etcd starts one per holder (a script, a worker) the first time
that holder claims anything, detached in its own session. It refreshes the
lease every third of its TTL and revokes it as soon as the holder is gone
(within leasekeep.POLL_S), so the holder's claims go with it; if this host dies, the
keeper dies too and the lease expires after the TTL.

A claim taken with `linger_s` (a round's worker) gets a keeper of its own that
keeps the lease that much longer after the holder is gone.

    python -c 'from looop_py.coord.keeper import main; …' WORKDIR LEASE PID CREATED HOST LINGER
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from looop_py.coord.base import HOST_ENV
from looop_py.coord.choose import coordinator, open_workdir
from looop_py.workdir.paths import Paths


def main(argv: list[str]) -> int:
    root, lease, pid, created, host, *rest = argv
    linger_s = float(rest[0]) if rest else 0.0
    for sig in (signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)  # detached: only kill, or the holder's end, ends it
    os.environ[HOST_ENV] = host  # the holder's host id, whatever this environment says
    wd = open_workdir(Paths(Path(root)))
    try:
        keep = getattr(coordinator(wd), "keep", None)
        if keep is None:
            return 2  # the work dir went back to files: nothing to keep
        keep(int(lease), int(pid), float(created), linger_s)
    finally:
        wd.close()
    return 0
