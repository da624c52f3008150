"""The environment looop hands to the processes it starts."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from looop_py.workdir.paths import Paths


def looop_bin() -> str:
    """An absolute path children can run to call back into looop."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "looop" and os.path.isfile(argv0):
        return os.path.abspath(argv0)
    beside = os.path.join(os.path.dirname(sys.executable), "looop")
    if os.path.isfile(beside):
        return beside
    import shutil  # only when the looop executable must be found on PATH

    return shutil.which("looop") or "looop"


def child_env(paths: Paths, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["LOOOP_DIR"] = str(paths.root)
    env["LOOOP_BIN"] = looop_bin()
    if extra:
        env.update(extra)
    return env
