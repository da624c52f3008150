"""One full beat (`looop pulse --force`) in a fresh interpreter, and what it left there.

For the tests that count what a full beat pays for at start-up (the modules it loads, the
methods its records generate): a fresh interpreter, because what this test process
imported already would hide it. `before` runs first (a counting hook); `report` is a
Python expression evaluated after the beat, whose repr comes back as a value.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

_BEAT = """
import os, sys
def stay(code):
    raise SystemExit(code)
os._exit = stay
sys.argv = [sys.argv[0], "-C", sys.argv[1], "pulse", "--force", "-q"]
from looop_py.console import main
try:
    main()
except SystemExit:
    pass
"""


def after_full_beat(root: Path, report: str, *, before: str = "") -> Any:
    """The value of `report` in a fresh interpreter after one full beat of the work dir."""
    code = f"{before}\n{_BEAT}\nprint('REPORT', repr({report}))\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOOP_")}
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, env=env
    )
    assert "REPORT " in done.stdout, done.stdout + done.stderr
    return ast.literal_eval(done.stdout.split("REPORT ", 1)[1].splitlines()[0])
