"""Safe ids: every id or name looop turns into a path segment is checked here.

Goal ids, sensor names, worker and round ids, claim and ask names all become
file names, so they share one rule: letters, digits, '.', '_' and '-', at most
128, no leading dot and no '..' anywhere. Nothing a model or a user writes can
then name a path outside its directory.
"""

from __future__ import annotations

import re

from looop_py.errors import UsageError

_SAFE_SEGMENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")


def is_safe_segment(name: str) -> bool:
    return bool(_SAFE_SEGMENT.fullmatch(name)) and ".." not in name


def check_segment(name: str, what: str = "name") -> str:
    """`name` itself when it is safe; a UsageError naming `what` otherwise."""
    if not is_safe_segment(name):
        raise UsageError(
            f"unsafe {what} {name!r}",
            "use letters, digits, '.', '_' and '-' (at most 128, no leading dot, no '..')",
        )
    return name
