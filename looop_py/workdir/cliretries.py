"""The retries of the agent CLIs that read them only from their own config, bounded.

codex and pi have no environment variable for their retries (AGENT_CLI_ENV bounds
claude's; llm's client makes 3 requests). At their defaults one beat against a
provider failing every request costs codex 30 requests (6 stream × 5 request tries)
and pi 12 (4 session tries × 3 from its HTTP client). Measured with codex 0.169.0
and pi 0.73.1 against tests/fakemodel.py, both give 3 requests a call here:

- codex: `-c model_providers.<id>.request_max_retries=0 -c …stream_max_retries=2`,
  added to a command that starts `codex exec` when its provider is a custom
  `[model_providers.<id>]` and neither the command nor that table sets either retry
  key (the user's own wins). The outer stream loop retries a 5xx and a dropped stream
  alike, with backoff. codex refuses any override of its built-in `openai` provider
  and reads no retry variable, so a command on it runs on MIRROR instead: the same
  provider as a table of looop's (below), retries bounded — unless codex is logged in
  with ChatGPT (auth.json holds tokens: not verifiable here, left at codex's 30), a
  profile is in effect (its provider outranks `-c`), the config cannot be read, or
  `--oss`. Its base URL is the user's `openai_base_url` if set, else codex's default.
- pi: `{"retry": {"maxRetries": 2, "provider": {"maxRetries": 0}}}` in the global
  settings of an agent dir looop owns, `state/pi-agent/`, which pi is pointed at
  through PI_CODING_AGENT_DIR (pi 0.73.1 has no settings flag or retry variable; it
  reads `<agent dir>/settings.json`, then the project's `.pi/settings.json` over it).
  Its settings.json is the user's own (`$PI_CODING_AGENT_DIR`, else `~/.pi/agent`)
  with `retry` added, rewritten when theirs changes; every other entry of the user's
  agent dir (auth.json, models.json, extensions/, sessions/ …) is a symlink to it, so
  credentials are never copied and what pi writes there lands in the user's files.
  Nothing is written into the directory pi runs in (a worker's workspace may be
  committed), and nothing at all when the user's settings set `retry` (theirs wins)
  or cannot be read. Deciders and workers use it alike.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from looop_py import jsonio

CODEX_RETRIES = {"request_max_retries": 0, "stream_max_retries": 2}
PI_RETRY = {"maxRetries": 2, "provider": {"maxRetries": 0}}
PI_AGENT_ENV = "PI_CODING_AGENT_DIR"
PI_AGENT = "pi-agent"  # under state/: the agent dir looop runs pi with
# Not linked: the settings looop writes itself; pi's lock dirs beside a file it writes.
_LINKING = ".looop-link"  # a link being made, renamed over its name once made
_NOT_LINKED = frozenset(("settings.json", "settings.json.lock", "auth.json.lock"))
# codex 0.169.0's built-in `openai` provider (model_provider_info.rs create_openai_provider)
# as a table: the same name, wire API, auth (OPENAI_API_KEY or auth.json's key) and base
# URL (unset: codex's default for the auth mode), its organization/project headers. Not
# copied: `supports_websockets`, so it speaks HTTPS+SSE, the transport codex falls back to.
MIRROR = "looop-openai"
_OPENAI = {
    "name": "OpenAI",
    "wire_api": "responses",
    "requires_openai_auth": "true",
    "env_http_headers": '{OpenAI-Organization="OPENAI_ORGANIZATION",'
    'OpenAI-Project="OPENAI_PROJECT"}',
}
_CODEX_EXEC = re.compile(r"^(\s*(?:\S*/)?codex\s+exec)(?=\s|$)")
_PI = re.compile(r"^\s*(?:\S*/)?pi(?=\s|$)")
_ID = re.compile(r"^[A-Za-z0-9_-]+$")
_SET_PROVIDER = re.compile(r"""(?:^|\s)model_provider\s*=\s*["']?([A-Za-z0-9_-]+)""")
_PROFILE = re.compile(r"""(?:^|\s)(?:--profile|-p)(?:\s+|=)["']?([A-Za-z0-9_-]+)""")


def _codex_config(env: Mapping[str, str]) -> dict[str, Any] | None:
    """The user's codex config.toml; {} when there is none, None when it cannot be read."""
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME", ""), ".codex")
    try:
        import tomllib  # only when a codex command is about to run

        with open(os.path.join(home, "config.toml"), "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return None


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
    if config is None:
        return command  # codex will name what is wrong with it
    provider = codex_provider(command, config)
    tables = config.get("model_providers")
    table = tables.get(provider) if isinstance(tables, dict) else None
    custom = isinstance(table, dict) or f"model_providers.{provider}." in command
    if provider == "openai" and not custom:
        return _mirror_openai(command, head, config, env)
    if not _ID.match(provider) or not custom:
        return command  # ollama, lmstudio: built in, and codex refuses overrides of them
    if isinstance(table, dict) and any(key in table for key in CODEX_RETRIES):
        return command  # the user bounded them
    return _insert(command, head, _retry_flags(provider))


def _retry_flags(provider: str) -> list[str]:
    return [f"model_providers.{provider}.{key}={n}" for key, n in CODEX_RETRIES.items()]


def _insert(command: str, head: re.Match[str], settings: list[str]) -> str:
    flags = " ".join(f"-c {shlex.quote(setting)}" for setting in settings)
    return f"{head.group(1)} {flags}{command[head.end() :]}"


def _mirror_openai(
    command: str, head: re.Match[str], config: Mapping[str, Any], env: Mapping[str, str]
) -> str:
    """`command` on MIRROR, codex's built-in `openai` provider as a table of looop's with
    the retries bounded; as it is where that would not be the same provider: a ChatGPT
    login (auth.json holding tokens), a profile (its provider outranks `-c`), `--oss`."""
    if _PROFILE.search(command) or config.get("profile") is not None or "--oss" in command:
        return command
    if "CODEX_ACCESS_TOKEN" in env or _chatgpt_login(env):
        return command
    settings = [f"model_provider={MIRROR}"]
    settings += [f"model_providers.{MIRROR}.{key}={value}" for key, value in _OPENAI.items()]
    base = config.get("openai_base_url")  # the built-in's own base URL setting, kept
    if isinstance(base, str) and base.strip():
        settings.append(f"model_providers.{MIRROR}.base_url={json.dumps(base)}")
    return _insert(command, head, settings + _retry_flags(MIRROR))


def _chatgpt_login(env: Mapping[str, str]) -> bool:
    home = env.get("CODEX_HOME") or os.path.join(env.get("HOME", ""), ".codex")
    try:
        auth = json.loads(Path(home, "auth.json").read_text())
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return True  # unknown: codex's own provider, as the user runs it
    return not isinstance(auth, dict) or bool(auth.get("tokens"))


def _pi_agent_dir(env: Mapping[str, str]) -> Path:
    agent = env.get(PI_AGENT_ENV) or os.path.join(env.get("HOME", ""), ".pi", "agent")
    return Path(os.path.expanduser(agent))


def bound_pi(command: str, env: Mapping[str, str], state: Path) -> dict[str, str]:
    """`env` for `command`: a command running pi gets PI_CODING_AGENT_DIR set to a
    looop-owned agent dir under `state` (see the module doc), unless the user's own
    settings set `retry`, cannot be read, or the dir cannot be made; else `env` as it is."""
    if _PI.match(command) is None:
        return dict(env)
    user = _pi_agent_dir(env)
    try:
        settings = json.loads((user / "settings.json").read_text())
    except FileNotFoundError:
        settings = {}
    except (OSError, ValueError):
        return dict(env)  # unreadable: pi will say so; looop does not guess around it
    if not isinstance(settings, dict) or "retry" in settings:
        return dict(env)  # the user bounded them (or pi will name the broken file)
    ours = state / PI_AGENT
    try:
        ours.mkdir(mode=0o700, parents=True, exist_ok=True)
        _link_entries(user, ours)
        wanted = (json.dumps({**settings, "retry": PI_RETRY}, indent=2) + "\n").encode()
        mine = ours / "settings.json"
        if mine.is_symlink() or not mine.exists() or mine.read_bytes() != wanted:
            jsonio.atomic_write(mine, wanted, mode=0o600, durable=False)
    except OSError:
        return dict(env)  # pi runs at its own settings rather than not at all
    return {**env, PI_AGENT_ENV: str(ours)}


def _link_entries(user: Path, ours: Path) -> None:
    """Every entry of the user's agent dir but settings.json, as a symlink in `ours`; a
    link whose entry the user no longer has is removed. What pi made in `ours` itself (a
    sessions/ dir, an empty auth.json) gives way to the user's entry once there is one."""
    try:
        names = {e.name for e in os.scandir(user) if e.name not in _NOT_LINKED}
    except FileNotFoundError:
        names = set()
    for entry in os.scandir(ours):
        if entry.name.endswith(_LINKING):
            continue  # another start's link on its way in
        if entry.is_symlink() and entry.name not in names:
            with contextlib.suppress(FileNotFoundError):  # another start removed it first
                os.unlink(entry.path)
    for name in names:
        link, target = ours / name, user / name
        if link.is_symlink() and os.readlink(link) == str(target):
            continue
        if link.is_dir() and not link.is_symlink():
            continue  # pi's own directory here: left alone rather than removed
        tmp = ours / f".{name}.{os.getpid()}{_LINKING}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.symlink(target, tmp)
        os.replace(tmp, link)
