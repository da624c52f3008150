"""Which directory is the work dir: -C DIR, else $LOOOP_DIR, else the nearest ancestor.

Plain strings and os.path: the quiet beat finds its work dir before anything
imports pathlib (beat/quiet.py); workdir.paths.find_workdir wraps it in Paths
and says what is wrong when there is none.
"""

from __future__ import annotations

import os

# typing is not imported at run time: the quiet beat calls this first.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_NAME = "looop.toml"


def locate(explicit: str | None, env: Mapping[str, str], cwd: str) -> tuple[str, str | None, bool]:
    """(directory, where it came from, whether it holds looop.toml).

    The source is "-C" or "$LOOOP_DIR" for a named directory (which is then the
    answer, work dir or not), None for the search from `cwd` upwards (the
    directory is then `cwd` itself when nothing was found).
    """
    for source, value in (("-C", explicit), ("$LOOOP_DIR", env.get("LOOOP_DIR") or None)):
        if value is None:
            continue
        root = os.path.realpath(os.path.join(cwd, os.path.expanduser(value)))
        return root, source, os.path.isfile(os.path.join(root, CONFIG_NAME))
    here = folder = os.path.realpath(cwd)
    while not os.path.isfile(os.path.join(folder, CONFIG_NAME)):
        parent = os.path.dirname(folder)
        if parent == folder:
            return here, None, False
        folder = parent
    return folder, None, True
