"""The coordination interface: claims with fencing tokens, fenced writes, one pulse at a time.

Two backends implement it: `files` (coord/files.py: claims/ and the kernel's
flock on this machine, today's behaviour and the default) and `etcd`
(coord/etcd.py: keys under a prefix, shared by every host). Both give the same
promises, which tests/coord/test_contract.py checks on each:

- a name has at most one live holder; claiming what you hold is harmless;
- the epoch (the fencing token) of a name grows by exactly one per new holder;
- a holder's claims go when it dies (files: the next claimant or beat sees the
  dead process; etcd: its lease is revoked by its keeper, or expires after
  `lease_ttl_s` when its host is gone);
- `fenced_put(name, epoch, key, value)` stores the value only while `epoch` is
  the current holder's token of `name`, so a holder that lost its claim (paused,
  partitioned, presumed dead) writes nothing;
- `pulse()` admits one beat at a time across everyone sharing the backend (on etcd
  one host keeps it across beats until it stops beating or `resign()`s: `looop down`;
  `keep_pulse(True)` keeps it between beats too: `looop up`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from looop_py.errors import UsageError
from looop_py.ids import is_safe_segment

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from looop_py.coord.holders import Holder
    from looop_py.coord.lease import Claim, Outcome
    from looop_py.coord.reaper import ClaimView

    class Coordinator(Protocol):
        backend: str
        host: str

        def claim(
            self,
            name: str,
            holder: Holder,
            *,
            ttl_s: float | None = None,
            renew: bool = False,
            now: float,
            linger_s: float = 0.0,
        ) -> Outcome: ...

        def unclaim(self, name: str, holder: Holder, *, now: float) -> Claim | None: ...

        def get(self, name: str, now: float) -> ClaimView | None: ...

        def list_claims(self, now: float) -> list[ClaimView]: ...

        def reap(self, now: float, round_live: Callable[[str], bool]) -> list[dict[str, Any]]: ...

        def fenced_put(self, name: str, epoch: int, key: str, value: bytes) -> bool: ...

        def read(self, key: str) -> bytes | None: ...

        def read_world(self) -> bytes | None: ...

        def commit_world(self, name: str, epoch: int, record: dict[str, Any]) -> bool: ...

        def pulse(self) -> AbstractContextManager[int | None]: ...

        def keep_pulse(self, between_beats: bool) -> None: ...

        def resign(self) -> dict[str, Any] | None: ...

        def close(self) -> None: ...


PULSE = "pulse"  # the claim each beat takes on a shared backend
WORLD = "world/committed"  # the committed world, as one value (files; etcd: per item)
HOST_ENV = "LOOOP_HOST_ID"


HOST_FILE = "host-id"  # under state/: this machine's name, never shared like looop.toml


def host_id(configured: str, state: str | os.PathLike[str] | None = None) -> str:
    """This host's name in claims and records: $LOOOP_HOST_ID, else the first line of
    `state`/host-id (a per-machine file), else the config (files only), else hostname."""
    found = os.environ.get(HOST_ENV)
    if not found and state is not None:
        try:
            with open(os.path.join(state, HOST_FILE), encoding="utf-8") as f:
                found = f.readline(128).strip()
        except (FileNotFoundError, NotADirectoryError):
            pass
        if found and not is_safe_segment(found):
            raise UsageError(
                f"{os.path.join(state, HOST_FILE)}: {found!r} is not a host name",
                "use letters, digits, '.', '_' and '-'",
            )
    found = found or configured
    if found:
        return found
    import socket  # only when neither names the host

    return socket.gethostname() or "localhost"


def check_key(key: str) -> str:
    """A shared-state key: path-like segments of safe characters (`world/committed`)."""
    if not all(is_safe_segment(p) for p in key.split("/")):
        raise UsageError(f"{key!r} is not a shared-state key", "use segments like world/committed")
    return key
