"""`@record`: a dataclass that the type checker holds frozen, without the run-time freeze.

Python 3.11 builds a frozen dataclass's `__setattr__` and `__delattr__` by exec()ing
source for each class, and gives it a longer `__init__` (every field through
`object.__setattr__`): ~0.2 ms a class at import, ~6 ms of every full beat over the
records on its path. A `@record` is frozen where our code is checked: mypy (strict, one
of the checks every change passes) refuses an assignment to any of its fields, as it
does for `frozen=True` (tests/project/test_records.py). At run time it is a plain
dataclass with neither method.

A record is compared by identity (no `__eq__`, the default `__hash__`), as the frozen
`eq=False` dataclasses it replaces were; `@record(eq=True)` compares by value and, as
any dataclass that is not frozen at run time, cannot be hashed (the config sections,
which tests compare). A value hashed as a key (Paths) stays `@dataclass(frozen=True)`:
there the run-time freeze keeps its hash right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, eq_default=False)
def record(
    cls: type[T] | None = None, /, *, eq: bool = False, repr: bool = True, slots: bool = False
) -> Any:
    """`@record` or `@record(repr=False, slots=True)`: see the module doc."""

    def wrap(cls: type[T]) -> type[T]:
        return dataclass(cls, eq=eq, repr=repr, slots=slots)

    return wrap if cls is None else wrap(cls)
