"""The range of every looop.toml value, checked when the file is loaded.

config.py checks names and types; this module checks that each value makes
sense: numbers finite and inside a range (a nan or inf timeout would never
fire, a zero one would fire at once), names that exist, runtime commands that
say where the prompt goes, `[actions.X]` tables of the right shape. A value
out of range is a ConfigError naming the key, so `looop` exits 2 with
`looop.toml: key: why` instead of running on a value it cannot honour.
Imported only when looop.toml changed: a cached table passed these checks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from looop_py.errors import ConfigError

MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0
MIB = 1024 * 1024


@dataclass(frozen=True)
class Range:
    """`low <= x <= high` (`low` excluded when `open_low`); `zero`: what 0 means, if allowed."""

    low: float
    high: float
    unit: str = ""
    open_low: bool = False
    zero: str | None = None

    def why_not(self, value: float) -> str | None:
        if not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if value == 0 and self.zero is not None:
            return None
        if value < self.low or (self.open_low and value == self.low) or value > self.high:
            return f"must be {self.describe()}, got {value!r}"
        return None

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        low = f"more than {_num(self.low)}" if self.open_low else f"at least {_num(self.low)}"
        text = f"{low} and at most {_num(self.high)}{unit}"
        return text + (f" (or 0: {self.zero})" if self.zero else "")

    def short(self) -> str:
        """As the starter looop.toml states it: `range >0..3600`, `range 0..100000`."""
        if self.zero is not None:
            return f"range 0..{_num(self.high)}"
        return f"range {'>' if self.open_low else ''}{_num(self.low)}..{_num(self.high)}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def seconds(high: float, *, zero: str | None = None) -> Range:
    """A duration: more than 0 s, at most `high`."""
    return Range(0, high, "s", open_low=True, zero=zero)


# Every numeric key. The starter looop.toml states the same ranges.
RANGES: dict[str, Range] = {
    "sensors.timeout_s": seconds(HOUR),
    "sensors.max_bytes": Range(1, MIB, "bytes"),
    "sensors.concurrency": Range(1, 64),
    "decider.timeout_s": seconds(DAY),
    "decider.max_tokens": Range(1, 1_000_000),
    "decider.max_retries": Range(1, 20, zero="no retries"),
    "decider.backoff_s": seconds(10 * MINUTE),
    "decider.max_wait_s": seconds(HOUR, zero="no waiting, so no retries"),
    "decider.usd_per_mtok_in": Range(0, 100_000, "USD", open_low=True, zero="free"),
    "decider.usd_per_mtok_out": Range(0, 100_000, "USD", open_low=True, zero="free"),
    "decider.usd_per_mtok_cached_in": Range(0, 100_000, "USD", open_low=True, zero="free"),
    "decider.usd_per_mtok_cache_write": Range(0, 100_000, "USD", open_low=True, zero="free"),
    "gates.shell_timeout_s": seconds(DAY),
    "limits.decides_per_hour": Range(1, 100_000, zero="no cap"),
    "limits.daily_tokens": Range(1, 10**12, zero="no budget"),
    "limits.daily_usd": Range(0, 1_000_000, "USD", open_low=True, zero="no budget"),
    "limits.unmetered_limit": Range(1, 1000),
    "limits.unpriced_usd_per_mtok": Range(0, 100_000, "USD", open_low=True, zero="hold instead"),
    "limits.backoff_base_s": seconds(DAY),
    "limits.backoff_max_s": seconds(7 * DAY),
    "limits.noop_ttl_s": seconds(30 * DAY, zero="never"),
    "limits.flap_streak": Range(2, 1000),
    "limits.prompt_max_bytes": Range(16384, 16 * MIB, "bytes"),
    "limits.runs_keep": Range(1, 10_000),
    "workers.max_live": Range(1, 1000),
    "workers.kill_grace_s": seconds(HOUR),
    "workers.stuck_after_s": seconds(365 * DAY),
    "workers.session_ttl_s": seconds(365 * DAY),
    "workers.verify_timeout_s": seconds(DAY),
    "workers.verify_budget_s": seconds(DAY, zero="no verify runs; they wait for a later beat"),
    "notify.timeout_s": seconds(HOUR),
    "notify.fail_streak": Range(1, 1000),
    "retention.rounds_s": seconds(10 * 365 * DAY),
    "retention.rounds_keep": Range(1, 100_000),
    "retention.asks_s": seconds(10 * 365 * DAY),
    "retention.asks_keep": Range(50, 100_000),  # the page's answered history shows 50
    "retention.forged_s": seconds(10 * 365 * DAY),
    "retention.forged_keep": Range(1, 100_000),
    "retention.per_beat": Range(1, 10_000),
    # etcd leases are whole seconds and at least 2 (below that, elections outlast them)
    "coordination.lease_ttl_s": Range(2, HOUR, "s"),
    "coordination.timeout_s": seconds(MINUTE),
}
ACTION_TIMEOUT = seconds(DAY)

# Kept equal to the registries they name (a test checks): those modules sit in
# layers above this one.
BACKENDS = ("rules", "command", "openai", "anthropic", "script", "noop")  # deciders.FACTORIES
BUILTIN_RUNTIMES = ("claude", "codex", "pi", "aider", "shell")  # workers.runtimes.BUILTINS
USAGE_KINDS = ("", "claude", "codex", "pi", "aider")  # workers.runtimes.USAGE_KINDS
PLACEHOLDER = "{{prompt_file}}"
# `[runtimes.NAME]` prices, each in the range the decider's have.
PRICE_KEYS = (
    "usd_per_mtok_in",
    "usd_per_mtok_out",
    "usd_per_mtok_cached_in",
    "usd_per_mtok_cache_write",
)
PRICE = Range(0, 100_000, "USD", open_low=True, zero="free")
CACHE_TTLS = ("5m", "1h")  # Anthropic's cache_control ttl values


def check(config: Any) -> None:
    """Raise ConfigError(`key: why`) for the first value out of its range.

    `config` is a workdir.config.Config (not imported: config.py imports this module).
    """
    for key, rng in RANGES.items():
        section, name = key.split(".")
        value = getattr(getattr(config, section), name)
        if value is None:
            continue  # an optional price left unset
        why = rng.why_not(value)
        if why is not None:
            raise ConfigError(
                f"{key}: {why}", f"see the comment on {name} in the starter looop.toml"
            )
    _check_names(config)
    _check_coordination(config.coordination)
    for kind, table in config.actions.items():
        _check_action(kind, table)


def _check_names(config: Any) -> None:
    d = config.decider
    if d.backend not in BACKENDS:
        raise ConfigError(
            f"decider.backend: unknown backend {d.backend!r}",
            f"choose one of: {', '.join(BACKENDS)}",
        )
    if d.backend == "command" and not d.command.strip():
        raise ConfigError(
            "decider.command: the command backend needs a command",
            'e.g. command = "claude -p --output-format json"',
        )
    if d.cache_ttl not in CACHE_TTLS:
        raise ConfigError(
            f"decider.cache_ttl: must be one of {', '.join(CACHE_TTLS)}, got {d.cache_ttl!r}"
        )
    if d.backend == "script" and not d.script.strip():
        raise ConfigError("decider.script: the script backend needs a script file")
    known = sorted({*BUILTIN_RUNTIMES, *config.runtimes})
    runtime = config.workers.default_runtime
    if runtime not in known:
        raise ConfigError(
            f"workers.default_runtime: unknown runtime {runtime!r}",
            f"use one of {', '.join(known)}, or add [runtimes.{runtime}]",
        )
    for name, rt in config.runtimes.items():
        where = f"runtimes.{name}"
        if not rt.command and name not in BUILTIN_RUNTIMES:
            raise ConfigError(f"{where}.command: a new runtime needs a command")
        for key in ("command", "read_only"):
            text = getattr(rt, key)
            if text and PLACEHOLDER not in text:
                raise ConfigError(
                    f"{where}.{key}: does not hold {PLACEHOLDER}",
                    "the worker reads its prompt from that file; put it where the path goes",
                )
        for key in PRICE_KEYS:
            value = getattr(rt, key)
            why = None if value is None else PRICE.why_not(value)
            if why is not None:
                raise ConfigError(
                    f"{where}.{key}: {why}", f"see the comment on {key} in the starter looop.toml"
                )
        if rt.usage not in USAGE_KINDS:
            raise ConfigError(
                f"{where}.usage: must be one of {', '.join(map(repr, USAGE_KINDS))},"
                f" got {rt.usage!r}"
            )


COORD_BACKENDS = ("files", "etcd")
_URL = re.compile(r"^(https?)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})/?$")
_PREFIX = re.compile(r"^/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$")


def _check_coordination(c: Any) -> None:
    """`[coordination]`: the backend, etcd's endpoints, prefix, TLS and auth options."""
    if c.backend not in COORD_BACKENDS:
        raise ConfigError(
            f"coordination.backend: unknown backend {c.backend!r}",
            f"choose one of: {', '.join(COORD_BACKENDS)}",
        )
    if c.host_id and not _HOST.match(c.host_id):
        raise ConfigError(
            f"coordination.host_id: {c.host_id!r} is not a host name",
            "use letters, digits, '.', '_' and '-' (at most 64)",
        )
    if c.backend != "etcd":
        return
    if c.host_id:  # looop.toml is shared (a git repo): every host would get this one id
        raise ConfigError(
            f"coordination.host_id: {c.host_id!r} in looop.toml would name every host that"
            " shares this file alike",
            "a host id is per machine: remove it here and set $LOOOP_HOST_ID, or write the"
            " name to state/host-id on that machine",
        )
    if not c.endpoints:
        raise ConfigError("coordination.endpoints: the etcd backend needs at least one endpoint")
    schemes = set()
    for url in c.endpoints:
        m = _URL.match(url)
        if m is None or not 0 < int(m.group(3)) < 65536:
            raise ConfigError(
                f"coordination.endpoints: {url!r} is not an etcd client URL",
                'write each as "http://HOST:PORT" or "https://HOST:PORT"',
            )
        schemes.add(m.group(1))
    if len(schemes) > 1:
        raise ConfigError("coordination.endpoints: mixes http and https")
    if not c.prefix or not _PREFIX.match(c.prefix) or "//" in c.prefix:
        raise ConfigError(
            f"coordination.prefix: {c.prefix!r} is not a key prefix",
            'the etcd backend needs one of its own, e.g. prefix = "/looop/team-a"',
        )
    tls = c.ca_cert or c.cert_cert or c.cert_key
    if tls and schemes != {"https"}:
        raise ConfigError(
            "coordination.ca_cert: TLS options need https:// endpoints",
            "change the endpoints to https://, or drop ca_cert, cert_cert and cert_key",
        )
    if bool(c.cert_cert) != bool(c.cert_key):
        raise ConfigError(
            "coordination.cert_key: a client certificate needs both cert_cert and cert_key"
        )
    if bool(c.username) != bool(c.password_env):
        raise ConfigError(
            "coordination.password_env: etcd auth needs both username and password_env",
            "password_env names the environment variable that holds the password",
        )
    if c.password_env and not _ENV.match(c.password_env):
        raise ConfigError(
            f"coordination.password_env: {c.password_env!r} is not a variable name",
            'name the variable, e.g. password_env = "ETCD_PASSWORD", not the password',
        )


_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_action(kind: str, table: Any) -> None:
    where = f"actions.{kind}"
    if isinstance(table, str):
        table = {"command": table}  # `kind = "cmd"` is short for a table with a command
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: should be a table with a `command`")
    unknown = sorted(set(table) - {"command", "timeout_s"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key", "known keys: command, timeout_s")
    command = table.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ConfigError(f"{where}.command: should be a non-empty string, got {command!r}")
    timeout = table.get("timeout_s", 300)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise ConfigError(f"{where}.timeout_s: should be a number, got {timeout!r}")
    why = ACTION_TIMEOUT.why_not(timeout)
    if why is not None:
        raise ConfigError(f"{where}.timeout_s: {why}")


def numeric_keys(config_cls: type[Any]) -> list[str]:
    """Every int or float key of looop.toml (tests check each has a range)."""
    out: list[str] = []
    for section in fields(config_cls):
        sample = getattr(config_cls(), section.name)
        if not is_dataclass(sample):
            continue
        for f in fields(sample):
            if str(f.type).removesuffix(" | None") in ("int", "float"):
                out.append(f"{section.name}.{f.name}")
    return out
