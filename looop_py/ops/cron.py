"""The user's crontab line for a work dir: show it, install it, remove it.

Our line ends with a marker comment naming the work dir, so installing twice
changes nothing, another work dir's line is a different line, and every line
the user wrote is written back exactly as it was. The real `crontab` program
reads and writes the table (`crontab -l`, `crontab -`).

cron runs a job with a bare environment (PATH=/usr/bin:/bin, no keys), where
an agent CLI in an npm prefix or ~/.local/bin is "command not found". So
`install` also writes state/cron.env, mode 0600, which the line sources: the
PATH it was installed from, the agent CLIs' settings (CARRIED) and the secret
variables the work dir's config names (the decider's key, `[env] scrub`
matches, `[runtimes.NAME] env`). Secrets never go into the crontab, and only
their names are shown.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from looop_py.errors import LooopError, UsageError
from looop_py.workdir.environ import AGENT_CLI_ENV, DEFAULT_KEY_ENVS
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.workdir.config import Config

MARKER = "# looop work dir:"
SCHEDULE = "* * * * *"  # every minute: the quiet beat is cheap, and a woken one says why
ENV_FILE = "cron.env"  # in state/: what the job sources
# Where an agent CLI finds itself, its provider and its settings, carried when set.
CARRIED = (
    "PATH",
    "LANG",
    "LC_ALL",
    "TZ",
    *(
        f"{p}_{s}"
        for p in ("HTTPS", "HTTP", "NO", "https", "http", "no")
        for s in ("PROXY", "proxy")
    ),
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "CLAUDE_CONFIG_DIR",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "CODEX_HOME",
    "PI_CODING_AGENT_DIR",
    "LLM_USER_PATH",
    "AIDER_MODEL",
    *AGENT_CLI_ENV,
)


class CronError(LooopError):
    """The crontab program failed; nothing was changed."""


@dataclass(frozen=True)
class CronStatus:
    line: str  # the line this work dir wants
    installed: str | None  # the line the crontab holds for this work dir, if any
    env_file: str = ""  # the file the line sources
    env_names: tuple[str, ...] = ()  # the variables it sets (never their values)

    @property
    def up_to_date(self) -> bool:
        return self.installed == self.line

    def to_json(self) -> dict[str, object]:
        return {
            "line": self.line,
            "installed": self.installed,
            "up_to_date": self.up_to_date,
            "env_file": self.env_file,
            "env_names": list(self.env_names),
        }


def job_env(env: Mapping[str, str], config: Config) -> dict[str, str]:
    """What the job needs from `env`: CARRIED and the secrets this work dir's config names."""
    secret = {n for n in env if any(fnmatch.fnmatchcase(n, p) for p in config.env.scrub)}
    secret |= {config.decider.api_key_env, *DEFAULT_KEY_ENVS}
    secret |= {n for rt in config.runtimes.values() for n in rt.env}
    names = sorted(({*CARRIED} | secret) - {""})
    return {n: env[n] for n in names if n in env}


def env_file(paths: Paths) -> Path:
    return paths.state / ENV_FILE


def write_env(paths: Paths, values: Mapping[str, str]) -> None:
    """state/cron.env, 0600 from its first byte, replaced whole (never seen half-written)."""
    target = env_file(paths)
    tmp = target.with_name(f".{ENV_FILE}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        text = "# written by `looop cron install`; sourced by its crontab line\n" + "".join(
            f"export {n}={shlex.quote(v)}\n" for n, v in values.items()
        )
        os.write(fd, text.encode("utf-8", "surrogateescape"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)


def read_env(paths: Paths) -> dict[str, str]:
    """The variables state/cron.env sets; {} when there is none."""
    try:
        text = env_file(paths).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            name, _, value = words[1].partition("=")
            found[name] = value
    return found


def looop_command() -> list[str]:
    """This installation's `looop`, by absolute path (cron's PATH is short)."""
    beside = Path(sys.executable).with_name("looop")
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "looop_py"]


def line_for(paths: Paths) -> str:
    argv = [*looop_command(), "-C", str(paths.root), "pulse"]
    source = f". {shlex.quote(str(env_file(paths)))} &&"
    return f"{SCHEDULE} {source} {shlex.join(argv)} {MARKER} {paths.root}"


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
    return CronStatus(line_for(paths), installed, str(env_file(paths)), tuple(read_env(paths)))


def install(paths: Paths, env: Mapping[str, str]) -> CronStatus:
    """Write state/cron.env from `env` (job_env), then add (or bring up to date) this work
    dir's line; every other line stays as it was."""
    paths.state.mkdir(parents=True, exist_ok=True)
    write_env(paths, env)
    table = read_table()
    want = line_for(paths)
    mine = [i for i, line in enumerate(table) if _ours(line, paths)]
    if [table[i] for i in mine] != [want]:
        kept = [line for i, line in enumerate(table) if i not in mine]
        write_table([*kept, want])
    return status(paths)


def remove(paths: Paths) -> CronStatus:
    """Remove this work dir's line and state/cron.env; every other line stays as it was."""
    table = read_table()
    kept = [line for line in table if not _ours(line, paths)]
    if kept != table:
        write_table(kept)
    env_file(paths).unlink(missing_ok=True)
    return status(paths)
