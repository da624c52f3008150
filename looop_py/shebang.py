"""What exec runs for a child: the program found on its PATH (moved out of procs.py,
which is at the module limit)."""

from __future__ import annotations

import os

# typing is not imported at run time: a quiet beat spawns its sensors through here.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def exec_path(program: str, env: Mapping[str, str]) -> str:
    """`program` as exec would find it on the child's PATH (what Popen does)."""
    if "/" in program:
        return program
    for folder in os.get_exec_path(env):
        candidate = os.path.join(folder, program)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    import errno  # not found: the error path only

    raise FileNotFoundError(errno.ENOENT, f"No such file or directory: {program!r}")
