"""Who holds a claim: a session label and the process whose life the claim follows.

A worker's claim follows the worker's own process (its pid and create time,
from its session record); anything else follows the script that asked (the
caller, or the caller's caller when the caller is a short-lived forked copy
of it, as `epoch=$(looop claim X)` can make), or the process named with --pid.
A loop round is a holder without a process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from looop_py import identity
from looop_py.errors import UsageError
from looop_py.ids import check_segment
from looop_py.workdir.paths import Paths

ROUND_PREFIX = "round."


@dataclass(frozen=True, slots=True)
class Holder:
    """Who asks: a session label (optional) and the process whose life the claim follows.

    A loop round holds its target across many beats and processes, so it is a
    holder without a process (`round_holder`): its claim lives as long as the
    round does (`reap` is told how to ask).
    """

    session: str | None
    pid: int | None
    create_time: float | None


def resolve_holder(paths: Paths, session: str | None, pid: int | None) -> Holder:
    """The holder for a command line: a live worker's own process, else `pid` (the caller's parent).

    Inside a worker, $LOOOP_SESSION_ID names the session and the claim follows
    the worker's life. Elsewhere the claim follows the script that ran `looop
    claim`, even from inside `$( )`, a pipeline or `( )` (whose forked copies of
    the script end at once: identity.lasting_ancestor), or the one `--pid` names.
    """
    if session is not None:
        check_segment(session, "session id")
        if pid is None:
            from looop_py.workers import records  # only inside a worker: `looop claim` is hot

            meta = records.read_meta(paths, session)
            if isinstance(meta.get("pid"), int):
                if not identity.is_alive(meta["pid"], meta.get("create_time")):
                    raise UsageError(
                        f"worker {session} is not alive, so it cannot hold a claim",
                        "claims follow their holder's life; start the worker again",
                    )
                return Holder(session, meta["pid"], float(meta["create_time"]))
    if pid is None:
        pid = identity.lasting_ancestor(os.getppid())
    created = identity.create_time(pid)
    if created is None:
        raise UsageError(f"process {pid} is not running", "pass the pid of a live process")
    return Holder(session, pid, created)


def round_holder(round_id: str) -> Holder:
    """A loop round as a holder: no process; the reaper asks whether the round is still live."""
    return Holder(ROUND_PREFIX + check_segment(round_id, "round id"), None, None)


def own_holder(session: str | None = None) -> Holder:
    """This very process as a holder (for code calling the API in process)."""
    pid = os.getpid()
    created = identity.create_time(pid)
    assert created is not None
    return Holder(session, pid, created)
