"""The environment looop hands to the processes it starts, and the secrets kept out of it.

Secrets stay with the decider: sensors, workers, run_shell, verify commands
and actions get looop's own environment minus every variable named by
`[decider] api_key_env`, matching `[env] scrub` (by default names ending in
`_KEY`, `_TOKEN`, `_SECRET`, `_PASSWORD`, `_PASSWD`, `_PWD`, `_PAT` or containing
SECRET or CREDENTIAL, and PGPASSWORD, MYSQL_PWD), or whose value is a URL
carrying a password (DATABASE_URL …), except the names `[env] keep` lists and
what tools need to work (ALWAYS_KEPT: PATH, PWD, SSH_AUTH_SOCK, proxies, package
index URLs). A
worker runtime gets a scrubbed variable only through its own
`[runtimes.NAME] env = ["NAME"]`. Only the decider's own request sees the
whole environment (`decider_env`). `redact` replaces the values of those
variables in text (a provider's error, a decider's output) before it reaches a
file: journal.md, events.jsonl and runs/ are written through it. It also finds
each value URL-encoded, JSON-escaped and base64-encoded (at any alignment).

The agent CLIs a decider or worker runs get AGENT_CLI_ENV too, each variable only
where the user's environment does not set it (theirs wins): their own retries
bounded, so one failing call costs at most a few requests, and their
non-essential traffic (update checks, telemetry) off.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.workdir.config import Config

DEFAULT_KEY_ENVS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
REDACTED = "[redacted]"
MIN_SECRET = 6  # shorter values are not hunted for in text (they would match everywhere)
ALWAYS_KEPT = frozenset(
    (
        *("PATH", "PWD", "OLDPWD", "HOME", "SSH_AUTH_SOCK", "GPG_AGENT_INFO"),
        *("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY"),
        *("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy"),
        *("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"),
        *("UV_DEFAULT_INDEX", "NPM_CONFIG_REGISTRY", "npm_config_registry"),
    )
)


def _url_with_password(value: str) -> bool:
    """scheme://user:password@host… (a connection string carrying its password)."""
    head, sep, rest = value.partition("://")
    if not sep or not head.replace("+", "").replace("-", "").replace(".", "").isalnum():
        return False
    auth, at, _ = rest.partition("@")
    return bool(at) and "/" not in auth and ":" in auth and len(auth.split(":", 1)[1]) > 0


# Read from each pinned CLI's source (docs/deciders.md): claude 2.1 retries any API error,
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


def matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    """Does a name match any of `patterns` (as fnmatch.fnmatchcase)? By str methods for the
    patterns whose only wildcard is `*` at an end, as every default one: a beat asks this
    of each variable several times, and fnmatch would compile a regex for each pattern and
    be called once per variable and pattern."""
    ends: list[str] = []
    starts: list[str] = []
    inner: list[str] = []
    exact: set[str] = set()
    other: list[str] = []
    for pattern in patterns:
        core = pattern.strip("*")
        if "*" in core or "?" in core or "[" in core:
            other.append(pattern)
        elif pattern.startswith("*") and pattern.endswith("*"):
            inner.append(core)
        elif pattern.startswith("*"):
            ends.append(core)
        elif pattern.endswith("*"):
            starts.append(core)
        else:
            exact.add(core)
    suffixes, prefixes = tuple(ends), tuple(starts)

    def matches(name: str) -> bool:
        return (
            name.endswith(suffixes)
            or name.startswith(prefixes)
            or name in exact
            or any(part in name for part in inner)
            or any(fnmatch.fnmatchcase(name, pattern) for pattern in other)
        )

    return matches


def secret_names(env: Mapping[str, str], config: Config) -> set[str]:
    """The variables of `env` no child gets: the decider's key and every scrub match."""
    patterns, keep, key_env = config.env.scrub, config.env.keep, config.decider.api_key_env
    scrubbed = matcher(patterns)
    names = {n for n in env if scrubbed(n)}
    names |= {n for n, v in env.items() if "://" in v and _url_with_password(v)}
    names -= set(keep) | ALWAYS_KEPT
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
    if not values:
        return []
    forms = set(values)
    for value in values:
        forms |= encoded_forms(value)
    return sorted(forms, key=len, reverse=True)


def encoded_forms(value: str) -> set[str]:
    """The ways a value shows up in a provider's error or a log: URL-encoded, JSON-escaped,
    and the part of its base64 that does not depend on the bytes around it, at each of the
    three alignments (so `Basic dXNlcjpTRUNSRVQ=` is found for SECRET)."""
    import base64  # only when there are secrets to hunt for
    import json
    from urllib.parse import quote, quote_plus

    forms = {quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]}
    forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
    raw = value.encode("utf-8", "surrogateescape")
    for pad in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            text = encode(b"\0" * pad + raw).decode()
            start, end = (pad * 4 + 2) // 3, ((pad + len(raw)) * 8) // 6
            core = text[start:end]
            if len(core) >= 8:
                forms.add(core)
    return {f for f in forms if len(f) >= MIN_SECRET}


def redact(text: str, config: Config) -> str:
    """`text` with the value of every secret variable (in any form) replaced by [redacted]."""
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
