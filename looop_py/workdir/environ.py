"""The environment looop hands to the processes it starts, and the secrets kept out of it.

Secrets stay with the decider: sensors, workers, run_shell, verify commands
and actions get looop's own environment minus every variable named by
`[decider] api_key_env` or matching `[env] scrub` (by default `*_API_KEY`,
`*_TOKEN`, `*_SECRET`, `*_PASSWORD`), except the names `[env] keep` lists. A
worker runtime gets a scrubbed variable only through its own
`[runtimes.NAME] env = ["NAME"]`. Only the decider's own request sees the
whole environment (`decider_env`). `redact` replaces the values of those
variables in text (a provider's error, a decider's output) before it reaches a
file: journal.md, events.jsonl and runs/ are written through it.

The agent CLIs a decider or worker runs get AGENT_CLI_ENV too, each variable only
where the user's environment does not set it (theirs wins): their own retries
bounded, so one failing call costs at most a few requests, and their
non-essential traffic (update checks, telemetry) off.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.workdir.config import Config

DEFAULT_KEY_ENVS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
REDACTED = "[redacted]"
MIN_SECRET = 6  # shorter values are not hunted for in text (they would match everywhere)


# Read from each pinned CLI's source (README "Agent CLIs"): claude 2.1 retries any API error,
# a 401 too, 10 times by default with backoff (~3 minutes for a bad key); 2 keeps its
# Retry-After-aware backoff to 3 requests a call. pi's startup network checks and telemetry.
AGENT_CLI_ENV = {
    "CLAUDE_CODE_MAX_RETRIES": "2",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "PI_OFFLINE": "1",
    "PI_TELEMETRY": "0",
}


def with_agent_cli_env(env: dict[str, str]) -> dict[str, str]:
    """`env` plus AGENT_CLI_ENV, a variable `env` already sets keeping its value."""
    return {**AGENT_CLI_ENV, **env}


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


def secret_names(env: Mapping[str, str], config: Config) -> set[str]:
    """The variables of `env` no child gets: the decider's key and every scrub match."""
    patterns, keep, key_env = config.env.scrub, config.env.keep, config.decider.api_key_env
    names = {n for n in env if any(fnmatch.fnmatchcase(n, p) for p in patterns)}
    names -= set(keep)
    names |= {n for n in (key_env, *DEFAULT_KEY_ENVS) if n and n in env}
    return names


def child_env(
    paths: Paths,
    extra: Mapping[str, str] | None = None,
    *,
    config: Config,
    passthrough: Iterable[str] = (),
) -> dict[str, str]:
    """looop's environment for a child process, secrets scrubbed (see the module doc)."""
    env = dict(os.environ)
    for name in secret_names(env, config) - set(passthrough):
        del env[name]
    env["LOOOP_DIR"] = str(paths.root)
    env["LOOOP_BIN"] = looop_bin()
    if extra:
        env.update(extra)
    return env


def decider_env(paths: Paths) -> dict[str, str]:
    """The whole environment, for the decider alone (an agent CLI needs its key)."""
    env = with_agent_cli_env(dict(os.environ))
    env["LOOOP_DIR"] = str(paths.root)
    env["LOOOP_BIN"] = looop_bin()
    return env


def _secret_values(config: Config) -> list[str]:
    env = os.environ
    values = {env[n] for n in secret_names(env, config) if len(env[n].strip()) >= MIN_SECRET}
    return sorted(values, key=len, reverse=True)


def redact(text: str, config: Config) -> str:
    """`text` with the value of every secret variable replaced by [redacted]."""
    for value in _secret_values(config):
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def redact_bytes(data: bytes, config: Config) -> bytes:
    """`redact` for bytes on their way to a file."""
    for value in _secret_values(config):
        raw = value.encode("utf-8", "surrogateescape")
        if raw in data:
            data = data.replace(raw, REDACTED.encode())
    return data
