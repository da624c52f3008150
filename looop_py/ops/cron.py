"""The user's crontab line for a work dir: show it, install it, remove it.

Our line ends with a marker comment naming the work dir, so installing twice
changes nothing, another work dir's line is a different line, and every line
the user wrote is written back exactly as it was. The real `crontab` program
reads and writes the table (`crontab -l`, `crontab -`).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from looop_py.errors import LooopError, UsageError
from looop_py.workdir.paths import Paths

MARKER = "# looop work dir:"
SCHEDULE = "* * * * *"  # every minute: the quiet beat is cheap, and a woken one says why


class CronError(LooopError):
    """The crontab program failed; nothing was changed."""


@dataclass(frozen=True)
class CronStatus:
    line: str  # the line this work dir wants
    installed: str | None  # the line the crontab holds for this work dir, if any

    @property
    def up_to_date(self) -> bool:
        return self.installed == self.line

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "installed": self.installed, "up_to_date": self.up_to_date}


def looop_command() -> list[str]:
    """This installation's `looop`, by absolute path (cron's PATH is short)."""
    beside = Path(sys.executable).with_name("looop")
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "looop_py"]


def line_for(paths: Paths) -> str:
    argv = [*looop_command(), "-C", str(paths.root), "pulse"]
    return f"{SCHEDULE} {shlex.join(argv)} {MARKER} {paths.root}"


def _crontab() -> str:
    found = shutil.which("crontab")
    if found is None:
        raise UsageError(
            "no crontab program on PATH",
            "install cron (Debian: apt-get install cron), or run `looop pulse` every minute"
            " from another scheduler",
        )
    return found


def read_table() -> list[str]:
    """The user's crontab lines; [] when the user has none yet."""
    done = subprocess.run([_crontab(), "-l"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        if "no crontab" in done.stderr.lower():
            return []
        raise CronError(f"crontab -l failed: {done.stderr.strip() or done.returncode}")
    return done.stdout.splitlines()


def write_table(lines: list[str]) -> None:
    text = "".join(f"{line}\n" for line in lines)
    done = subprocess.run(
        [_crontab(), "-"], input=text, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise CronError(f"crontab - failed: {done.stderr.strip() or done.returncode}")


def _ours(line: str, paths: Paths) -> bool:
    return line.rstrip().endswith(f"{MARKER} {paths.root}")


def status(paths: Paths) -> CronStatus:
    installed = next((line for line in read_table() if _ours(line, paths)), None)
    return CronStatus(line_for(paths), installed)


def install(paths: Paths) -> CronStatus:
    """Add (or bring up to date) this work dir's line; every other line stays as it was."""
    table = read_table()
    want = line_for(paths)
    mine = [i for i, line in enumerate(table) if _ours(line, paths)]
    if [table[i] for i in mine] != [want]:
        kept = [line for i, line in enumerate(table) if i not in mine]
        write_table([*kept, want])
    return status(paths)


def remove(paths: Paths) -> CronStatus:
    """Remove this work dir's line; every other line stays as it was."""
    table = read_table()
    kept = [line for line in table if not _ours(line, paths)]
    if kept != table:
        write_table(kept)
    return status(paths)
