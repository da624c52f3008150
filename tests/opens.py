"""Count the files a piece of looop opens, in a fresh interpreter, with an audit hook.

A fresh interpreter because the point is what one looop process reads: nothing cached
by an earlier test in this one. The hook sees every `open()` (Python's and `os.open`),
so a read that slips past a cache is counted, not guessed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

PRELUDE = """
import collections, json, os, sys, time
from pathlib import Path
root = sys.argv[1]
opens = collections.Counter()
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if path.startswith(root + os.sep):
            opens[os.path.relpath(path, root)] += 1
from looop_py.coord.choose import open_workdir
from looop_py.workdir.paths import Paths
wd = open_workdir(Paths(Path(root)))
"""


def counted(root: object, body: str, *args: str) -> Any:
    """Run `body` after the hook is set (names: `wd`, `opens`, `sys`, `json`, `time`);
    it prints one JSON value, which is returned. argv[1] is `root`, then `args`."""
    script = PRELUDE + "sys.addaudithook(hook)\n" + body
    done = subprocess.run(
        [sys.executable, "-c", script, str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)
