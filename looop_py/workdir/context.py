"""One work dir as a command sees it, built once at the door and passed down.

A door — the CLI group, `looop serve`, `looop up`, a lease keeper, the Python
API — finds the work dir, loads looop.toml once and opens the shelf its
`[coordination]` backend names (coord/choose.py `open_workdir`). Everything below
takes the `WorkDir` and reads what it needs from it: nothing re-reads the config
or re-opens the shelf from a path, and no module keeps state of its own between
calls. What a command may reuse while it runs (the goals listing within a beat,
a parsed index) lives in `memo`, on this object, and goes with it.

A test builds one over any shelf and a fixed clock and calls the core directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import field
from typing import TYPE_CHECKING, Any, TypeVar

from looop_py.records import record
from looop_py.workdir import environ
from looop_py.workdir.config import Config
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.workdir.shelf import Shelf  # a Protocol, known to the type checker only

T = TypeVar("T")
Clock = Callable[[], float]


class Memo:
    """What a command worked out once and may reuse: `keep` for values keyed by a file's
    stat (they stay right while the file does), `scope` for values that hold only while
    nothing writes (a beat's REAP, ADVANCE and SENSE list goals/ once)."""

    __slots__ = ("_kept", "_scopes")

    def __init__(self) -> None:
        self._kept: dict[object, tuple[object, Any]] = {}
        self._scopes: list[dict[object, Any]] = []

    def keep(self, key: object, stamp: object, compute: Callable[[], T]) -> T:
        """`compute()`, reused while `stamp` (a file's stat) is what it was."""
        found = self._kept.get(key)
        if found is not None and found[0] == stamp:
            value: T = found[1]
            return value
        value = compute()
        self._kept[key] = (stamp, value)
        return value

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Within this block `once` computes each key once (nested blocks share it)."""
        self._scopes.append(self._scopes[-1] if self._scopes else {})
        try:
            yield
        finally:
            self._scopes.pop()

    def once(self, key: object, compute: Callable[[], T]) -> T:
        """`compute()`, worked out once within a `scope` block (every time outside one)."""
        if not self._scopes:
            return compute()
        memo = self._scopes[-1]
        if key not in memo:
            memo[key] = compute()
        value: T = memo[key]
        return value


@record(slots=True)
class WorkDir:
    """A work dir's paths, its parsed looop.toml, the shelf its records live on and the
    clock every policy reads `now` from."""

    paths: Paths
    config: Config
    shelf: Shelf
    clock: Clock = time.time
    memo: Memo = field(default_factory=Memo, repr=False)

    def redact(self, text: str) -> str:
        """`text` with every secret value of this config's (workdir/environ.py) hidden."""
        return environ.redact(text, self.config)

    def redact_bytes(self, data: bytes) -> bytes:
        return environ.redact_bytes(data, self.config)

    def close(self) -> None:
        """Let go of what the shelf holds (an etcd lease and its keeper thread)."""
        self.shelf.close()
