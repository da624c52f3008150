"""The retries of the agent CLIs that read them only from their own config, bounded.

codex and pi have no environment variable for their retries (AGENT_CLI_ENV bounds
claude's; llm's client makes 3 requests). At their defaults one beat against a
provider failing every request costs codex 30 requests (6 stream × 5 request tries)
and pi 12 (4 session tries × 3 from its HTTP client). Measured with codex 0.169.0
and pi 0.73.1 against tests/fakemodel.py, both give 3 requests a call here:

- codex: `-c model_providers.<id>.request_max_retries=0 -c …stream_max_retries=2`,
  added to a command that starts `codex exec` when its provider is a custom
  `[model_providers.<id>]` (codex refuses overrides of its built-in providers) and
  neither the command nor that table sets either retry key (the user's own wins).
  The outer stream loop retries a 5xx and a dropped stream alike, with backoff.
- pi: `{"retry": {"maxRetries": 2, "provider": {"maxRetries": 0}}}` in the project
  settings pi reads from the directory it runs in (`<cwd>/.pi/settings.json`, merged
  over the global `settings.json`), written only when that file is absent and the
  user's global settings say nothing about `retry`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CODEX_RETRIES = {"request_max_retries": 0, "stream_max_retries": 2}
PI_RETRY = {"maxRetries": 2, "provider": {"maxRetries": 0}}
_CODEX_EXEC = re.compile(r"^(\s*(?:\S*/)?codex\s+exec)(?=\s|$)")
_PI = re.compile(r"^\s*(?:\S*/)?pi(?=\s|$)")
_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_SET_PROVIDER = re.compile(r"""(?:^|\s)model_provider\s*=\s*["']?([A-Za-z0-9_-]+)""")
_PROFILE = re.compile(r"""(?:^|\s)(?:--profile|-p)(?:\s+|=)["']?([A-Za-z0-9_-]+)""")


def _codex_config(env: Mapping[str, str]) -> dict[str, Any]:
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME", ""), ".codex")
    try:
        import tomllib  # only when a codex command is about to run

        with open(os.path.join(home, "config.toml"), "rb") as f:
            return tomllib.load(f)
    except (OSError, ValueError):
        return {}


def codex_provider(command: str, config: Mapping[str, Any]) -> str:
    """The provider id `command` runs codex with: its own `-c model_provider=`, else its
    profile's (`--profile`, else config's `profile`), else config's, else codex's `openai`."""
    found = _SET_PROVIDER.search(command)
    if found:
        return found.group(1)
    profile = _PROFILE.search(command)
    name = profile.group(1) if profile else config.get("profile")
    profiles = config.get("profiles")
    if isinstance(name, str) and isinstance(profiles, dict):
        chosen = profiles.get(name)
        if isinstance(chosen, dict) and isinstance(chosen.get("model_provider"), str):
            return str(chosen["model_provider"])
    provider = config.get("model_provider")
    return provider if isinstance(provider, str) else "openai"


def bound_codex(command: str, env: Mapping[str, str]) -> str:
    """`command` with codex's retries bounded (see the module doc), or as it is."""
    head = _CODEX_EXEC.match(command)
    if head is None or any(key in command for key in CODEX_RETRIES):
        return command
    config = _codex_config(env)
    provider = codex_provider(command, config)
    tables = config.get("model_providers")
    table = tables.get(provider) if isinstance(tables, dict) else None
    custom = isinstance(table, dict) or f"model_providers.{provider}." in command
    if not _ID.match(provider) or not custom:
        return command  # a built-in provider: codex refuses `-c model_providers.openai.…`
    if isinstance(table, dict) and any(key in table for key in CODEX_RETRIES):
        return command  # the user bounded them
    flags = " ".join(
        f"-c {shlex.quote(f'model_providers.{provider}.{key}={n}')}"
        for key, n in CODEX_RETRIES.items()
    )
    return f"{head.group(1)} {flags}{command[head.end() :]}"


def _pi_global(env: Mapping[str, str]) -> Path:
    agent = env.get("PI_CODING_AGENT_DIR") or os.path.join(env.get("HOME", ""), ".pi", "agent")
    return Path(agent).expanduser() / "settings.json"


def bound_pi(command: str, cwd: Path, env: Mapping[str, str]) -> Path | None:
    """For a command running pi in `cwd`: write `<cwd>/.pi/settings.json` with PI_RETRY
    unless it exists or the user's global settings set `retry`; the file written, or None."""
    if _PI.match(command) is None:
        return None
    project = cwd / ".pi" / "settings.json"
    if project.exists():
        return None
    try:
        user = json.loads(_pi_global(env).read_text())
    except FileNotFoundError:
        user = {}
    except (OSError, ValueError):
        return None  # unreadable: pi will say so; looop does not guess around it
    if not isinstance(user, dict) or "retry" in user:
        return None
    try:
        project.parent.mkdir(exist_ok=True)
        fd = os.open(project, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:  # written meanwhile, or not writable: pi runs at its own settings
        return None
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps({"retry": PI_RETRY}, indent=2) + "\n")
    return project
