"""A shelf in memory: the Shelf contract with nothing behind it, for tests that call the
core directly through a WorkDir (no disk, no etcd)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from looop_py.ids import check_segment
from looop_py.workdir.shelf import check_kind


class MemoryShelf:
    backend = "memory"
    shared = False

    def __init__(self, host: str = "") -> None:
        self.host = host
        self.records: dict[tuple[str, str], bytes] = {}
        self._lock = threading.Lock()

    def _key(self, kind: str, name: str) -> tuple[str, str]:
        return check_kind(kind), check_segment(name, "record name")

    def where(self, kind: str, name: str) -> str:
        return f"memory:{kind}/{name}"

    def get(self, kind: str, name: str) -> bytes | None:
        return self.records.get(self._key(kind, name))

    def names(self, kind: str) -> list[str]:
        return sorted(n for k, n in self.records if k == check_kind(kind))

    def items(self, kind: str) -> list[tuple[str, bytes | None]]:
        return [(n, self.records.get((kind, n))) for n in self.names(kind)]

    def empty(self, kind: str) -> bool:
        return not self.names(kind)

    def put(self, kind: str, name: str, data: bytes) -> None:
        self.records[self._key(kind, name)] = data

    def create(self, kind: str, name: str, data: bytes) -> bool:
        with self._lock:
            if self._key(kind, name) in self.records:
                return False
            self.put(kind, name, data)
            return True

    def delete(self, kind: str, name: str) -> bool:
        return self.records.pop(self._key(kind, name), None) is not None

    def move(self, kind: str, name: str, to: str) -> bool:
        with self._lock:
            data = self.records.pop(self._key(kind, name), None)
            if data is None:
                return False
            self.put(to, name, data)
            return True

    def swap(self, kind: str, name: str, old: bytes | None, new: bytes) -> bool:
        with self._lock:
            if self.get(kind, name) != old:
                return False
            self.put(kind, name, new)
            return True

    @contextlib.contextmanager
    def fenced(self, claim: str, token: int) -> Iterator[None]:
        yield

    def confirm(self, what: str) -> None:
        return None  # one process: nothing else could hold the pulse

    def close(self) -> None:
        pass
