"""Sections of the decide prompt that fit a byte budget: as many entries as fit, in order,
and what was left out named. Entries may be rendered as they are asked for (`Lazy`), so
at 10,000 goals only the goals that fit are read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass
class Fit:
    """Entries of one list section that fit its budget, and how many did not."""

    kept: list[str]
    left_out: int
    noun: str

    def body(self) -> str:
        lines = list(self.kept)
        if self.left_out:
            lines.append(f"(section truncated: {self.left_out} more {self.noun} not shown)")
        return "\n".join(lines) if lines else f"(no {self.noun})"

    def size(self) -> int:
        return len(self.body().encode()) + 64  # and the section's title line


class Entries(Protocol):
    """What `fit` takes: a list, or goals rendered as they are asked for (`Lazy`)."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> str: ...


class Lazy:
    """Entries rendered on first use, each once: only the goals that fit are read."""

    def __init__(self, n: int, render: Callable[[int], str]) -> None:
        self._n, self._render, self._done = n, render, dict[int, str]()

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int, /) -> str:
        if i not in self._done:
            self._done[i] = self._render(i)
        return self._done[i]


def fit(entries: Entries, budget: int, noun: str, *, keep: Sequence[int] = ()) -> Fit:
    """As many entries as fit `budget` bytes, in their order; indexes in `keep` go first.

    The marker naming what was left out is counted inside the budget.
    """
    room = max(0, budget - 80)
    chosen: set[int] = set()
    for i in (*keep, *range(len(entries))):
        if i in chosen:
            continue
        size = len(entries[i].encode()) + 1
        if size > room:
            if i in keep:
                continue
            break
        chosen.add(i)
        room -= size
    return Fit([entries[i] for i in sorted(chosen)], len(entries) - len(chosen), noun)


def natural(entries: Entries, enough: float = float("inf")) -> int:
    """What the entries take in full, summed only until it reaches `enough`."""
    total = 128
    for i in range(len(entries)):
        if total >= enough:
            break
        total += len(entries[i].encode()) + 1
    return total
