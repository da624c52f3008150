"""What a sealed quiet beat costs, counted: the modules it imports and the folders it lists.

A quiet beat is mostly interpreter start-up (bench/README.md, "The command's launcher"):
each module it imports is a stat, an open and an unmarshal, and a standard module such as
functools or collections pulls in a dozen more. The set is pinned exactly, from an
interpreter started without `site` (-S), so nothing the environment preloads can hide an
import: a new one fails here and must be paid for by the quiet path or deferred.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import xxhash

import looop_py
from looop_py.workdir.paths import Paths
from tests.beat.test_quiet import (
    _child_pulse,
    _churning_wd,
    _claimed_wd,
    _last_beat,
    _pulse,
    _quiet_wd,
    holder,  # noqa: F401 - the fixture
)

# Everything a sealed quiet beat imports beyond what the interpreter loads without site.
QUIET_IMPORTS = {
    "__future__",
    "_ctypes",  # prctl(PR_SET_CHILD_SUBREAPER) while the sensors run (orphans.py)
    "fcntl",  # the pulse lock
    "select",  # one poll object for every sensor's pipes
    "xxhash",
    "xxhash._xxhash",
    "xxhash.version",
    "looop_py",
    "looop_py.console",
    "looop_py.beat",
    "looop_py.beat.quiet",
    "looop_py.logfile",
    "looop_py.orphans",
    "looop_py.procs",
    "looop_py.shebang",  # what exec runs for each sensor
    "looop_py.locks",
    "looop_py.sensing",
    "looop_py.sensing.seal",
    "looop_py.sensing.survey",
    "looop_py.world",
    "looop_py.workdir",
    "looop_py.workdir.locate",
}


def _bare_child(wd: Paths, report: str) -> list[str]:
    """A child interpreter without site that finds looop_py and xxhash where this one does,
    runs `looop pulse` through its door and then runs `report`."""
    where = [str(Path(looop_py.__file__).parents[1]), str(Path(xxhash.__file__).parents[1])]
    code = f"import sys\nsys.path[:0] = {where!r}\n" + _child_pulse(wd, report)
    return [sys.executable, "-S", "-c", code]


def _report(argv: list[str], tag: str) -> object:
    done = subprocess.run(argv, capture_output=True, text=True)
    assert f"{tag} " in done.stdout, done.stdout + done.stderr
    return ast.literal_eval(done.stdout.split(f"{tag} ", 1)[1].splitlines()[0])


def test_a_quiet_beat_imports_exactly_the_pinned_modules(wd: Paths) -> None:
    _quiet_wd(wd)
    _pulse(wd)
    child = _bare_child(wd, "print('NEW', sorted(set(sys.modules) - before))")
    _report(child, "NEW")  # the first run seals for this interpreter and argv
    loaded = set(_report(child, "NEW"))  # type: ignore[arg-type]
    assert _last_beat(wd).get("sealed") is True, "the pinned set is the quiet beat's"
    assert not loaded - QUIET_IMPORTS, f"new on the quiet path: {sorted(loaded - QUIET_IMPORTS)}"
    assert loaded == QUIET_IMPORTS, f"no longer imported: {sorted(QUIET_IMPORTS - loaded)}"


def test_work_in_play_adds_only_its_own_module(
    wd: Paths,
    holder: subprocess.Popen[bytes],  # noqa: F811 - the fixture
) -> None:
    """A churning detail parses one output with the C half of json (not the json package,
    whose `re` loads enum and functools); a live claim reads /proc (identity, without
    functools). Each adds its module and nothing else to the quiet beat."""
    _churning_wd(wd)
    _claimed_wd(wd, holder.pid)
    _pulse(wd)
    child = _bare_child(wd, "print('NEW', sorted(set(sys.modules) - before))")
    for _ in range(2):  # the first run seals for this interpreter and argv
        loaded = set(_report(child, "NEW"))  # type: ignore[arg-type]
    assert _last_beat(wd).get("sealed") is True
    assert (wd.snapshots / "sensor-churn.json").read_text().count('"at"') == 1, "it parsed"
    in_play = {"_json", "looop_py.sensing.steady", "looop_py.identity", "_functools"}
    assert loaded == QUIET_IMPORTS | in_play, sorted(loaded ^ (QUIET_IMPORTS | in_play))


def test_a_quiet_beat_lists_each_folder_once_and_opens_no_file_as_one(wd: Paths) -> None:
    """claims/, answers/ and asks/ say whether they hold anything and what, in one listing;
    a file among the sessions (the start lock `looop worker start` leaves) is not listed."""
    _quiet_wd(wd)
    (wd.sessions / ".start.lock").touch()
    _pulse(wd)
    hook = (
        "listed = []\n"
        "def seen(event, args):\n"
        "    if event in ('os.scandir', 'os.listdir'):\n"
        "        listed.append(args[0] if isinstance(args[0], int) else str(args[0]))\n"
        "sys.addaudithook(seen)\n"
    )
    report = "print('LISTED', [p for p in listed if not isinstance(p, int)])"
    child = _bare_child(wd, report)
    child[-1] = child[-1].replace("before = set(sys.modules)", hook + "before = None", 1)
    _report(child, "LISTED")  # the first run seals for this interpreter and argv
    listed = _report(child, "LISTED")
    assert _last_beat(wd).get("sealed") is True
    assert isinstance(listed, list)
    inside = [Path(p) for p in listed if Path(p).is_relative_to(wd.root)]  # not the imports'
    names = [str(p.relative_to(wd.root)) for p in inside]
    assert {"claims", "answers", "asks", "sessions", "snapshots"} <= set(names), names
    assert len(names) == len(set(names)), f"listed more than once: {sorted(names)}"
    assert "sessions/.start.lock" not in names
