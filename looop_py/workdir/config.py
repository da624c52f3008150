"""looop.toml → frozen records with documented defaults.

Each `[section]` of the file is one record below; a key the file leaves out
keeps the default written here (and, commented, in the starter looop.toml).
A key of the wrong type or an unknown key is a ConfigError naming it, so a
typo never silently falls back to a default.
"""

from __future__ import annotations

import contextlib
from dataclasses import MISSING, Field, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from looop_py import jsonio
from looop_py.errors import ConfigError, CorruptFile
from looop_py.ids import is_safe_segment
from looop_py.records import record


# @record: frozen to mypy, not at run time (records.py); repr=False: nothing prints a config
# (pytest compares them field by field on its own). Each generated method is a full beat's
# fixed cost at import. eq=True: tests compare a loaded config with the defaults.
@record(eq=True, repr=False, slots=True)
class SensorsConfig:
    """`[sensors]`: how long a sensor may run, how much it may print, how many at once."""

    timeout_s: float = 60.0  # per sensor; a `# looop:timeout=N` header overrides it
    max_bytes: int = 8192  # stdout cap; more is reported as too-large, never stored
    concurrency: int = 8  # sensors running at once


@record(eq=True, repr=False, slots=True)
class DeciderConfig:
    """`[decider]`: which backend picks the move, and how it is reached and priced."""

    backend: str = "rules"  # rules | command | openai | anthropic | script | noop
    # command: an agent CLI run with `bash -c`; the prompt goes on stdin, or into a
    # file whose shell-quoted path replaces {{prompt_file}}.
    command: str = ""
    timeout_s: float = 600.0  # command: the whole run; HTTP: each attempt
    # openai / anthropic: "" means https://api.openai.com/v1 or https://api.anthropic.com
    base_url: str = ""
    model: str = ""
    api_key_env: str = ""  # "" means OPENAI_API_KEY or ANTHROPIC_API_KEY
    max_tokens: int = 4096  # output tokens per decide
    max_retries: int = 4  # extra attempts after a 429 / 5xx / dropped connection
    backoff_s: float = 1.0  # first retry delay, doubled each time (Retry-After wins)
    max_wait_s: float = 60.0  # total time spent waiting between attempts
    structured: bool = True  # openai: ask for JSON-schema structured output
    script: str = ""  # script: moves to replay (JSON lines or a JSON array), work-dir relative
    usd_per_mtok_in: float | None = None  # prices per million tokens, for backends that
    usd_per_mtok_out: float | None = None  # report tokens but no cost
    usd_per_mtok_cached_in: float | None = None  # prompt tokens read from a cache (None: _in)
    usd_per_mtok_cache_write: float | None = None  # prompt tokens written to one (None: _in)
    cache_ttl: str = "1h"  # anthropic: how long its prompt cache keeps the stable part, 5m | 1h


@record(eq=True, repr=False, slots=True)
class GatesConfig:
    """`[gates]`: what a move may run without a human's approval (docs/safety.md)."""

    shell_allow: tuple[str, ...] = ()  # leading words of simple commands that may run unasked
    shell_timeout_s: float = 300.0  # a run_shell's whole process group is killed after this
    allow_dangerous: bool = False  # True switches the deny-list tripwire off
    # -- what a model may run unasked (moves/gate.py; docs/safety.md) --
    allow_runtimes: tuple[str, ...] = ()  # runtimes whose prompt may run as code unasked
    allow_sensors: tuple[str, ...] = ()  # sensor names (fnmatch) a model may write unasked
    allow_outside_links: bool = False  # follow goal/sensor/PLAYBOOK symlinks out of the work dir


@record(eq=True, repr=False, slots=True)
class LimitsConfig:
    """`[limits]`: caps and budgets on decides, backoff after failures, the prompt."""

    decides_per_hour: int = 120  # 0 = no cap
    daily_tokens: int = 0  # 0 = no budget; counted from the usage backends report
    daily_usd: float = 0.0  # 0 = no budget
    unmetered_limit: int = 3  # with a budget: this many unmetered decides in a row stop it
    # A call whose price is unknown (tokens, no cost, no price): priced at this worst case
    # per million tokens against daily_usd; 0: daily_usd holds every loop until it has one.
    unpriced_usd_per_mtok: float = 0.0
    backoff_base_s: float = 60.0  # after n failures in a row wait base·2^(n−1) s …
    backoff_max_s: float = 300.0  # … but never longer than this
    noop_ttl_s: float = 21600.0  # re-decide an unchanged world this long after a noop; 0 = never
    flap_streak: int = 5  # a signal changing this many beats running is called flapping
    prompt_max_bytes: int = 262144
    runs_keep: int = 50  # decide archives kept in runs/


@record(eq=True, repr=False, slots=True)
class WorkersConfig:
    """`[workers]`: the fleet cap and how workers start, stall and are cleaned up."""

    max_live: int = 8  # fleet cap: live workers at once
    default_runtime: str = "shell"  # runtime when a start names none
    kill_grace_s: float = 5.0  # SIGTERM, then SIGKILL after this long
    stuck_after_s: float = 900.0  # no output for this long: health `stuck`
    session_ttl_s: float = 259200.0  # dead sessions are pruned after 3 days
    verify_timeout_s: float = 60.0  # one `--verify` command
    verify_budget_s: float = 120.0  # all verifies of one beat together
    repo: str = ""  # git repo for `--workspace git-worktree` ("" = the one holding the work dir)
    worktree_root: str = ""  # where worktrees go ("" = <work dir>/.worktrees)


@record(eq=True, repr=False, slots=True)
class RuntimeConfig:
    """`[runtimes.NAME]`: how to launch one kind of worker."""

    command: str = ""  # must hold {{prompt_file}}; "" keeps a built-in's command
    usage: str = ""  # where usage is read from: "claude" | "codex" | "pi" | "aider" | "" (worker)
    read_only: str = ""  # the command in the CLI's read-only mode, for L1 loops ("" = none)
    # -- safety (docs/safety.md) --
    executes_prompt: bool | None = None  # the prompt runs as code (None: built-ins know; new: yes)
    env: tuple[str, ...] = ()  # scrubbed variables this runtime still gets, e.g. its own API key
    # -- prices per million tokens, for a CLI that reports tokens but no cost (spend/prices.py;
    # None: the built-in price of the pinned CLI's default model, if it is one) --
    usd_per_mtok_in: float | None = None
    usd_per_mtok_out: float | None = None
    usd_per_mtok_cached_in: float | None = None  # None: _in
    usd_per_mtok_cache_write: float | None = None  # None: _in


# -- safety: what children inherit (workdir/environ.py; docs/safety.md) --------------------

# Anchored name patterns of the secrets tools commonly read (*_KEY does not match *_KEY_ID,
# *_TOKEN not *_TOKENS); workdir/environ.py also scrubs any variable whose value is a URL
# carrying a password (DATABASE_URL …) and always keeps PATH, PWD, proxies, index URLs.
DEFAULT_SCRUB = (
    *("*_KEY", "*_TOKEN", "*_SECRET", "*_PASSWORD", "*_PASSWD", "*_PWD", "*_PAT"),
    *("*SECRET*", "*CREDENTIAL*", "PGPASSWORD", "MYSQL_PWD"),
)


@record(eq=True, repr=False, slots=True)
class EnvConfig:
    """`[env]`: variables no child process (sensor, worker, run_shell, verify, action) gets."""

    scrub: tuple[str, ...] = DEFAULT_SCRUB  # fnmatch patterns; [decider] api_key_env always
    keep: tuple[str, ...] = ()  # names every child keeps although they match `scrub`


@record(eq=True, repr=False, slots=True)
class NotifyConfig:
    """`[notify]`: a command run once per event a human should hear about."""

    command: str = ""  # bash -c; the event as JSON on stdin and LOOOP_EVENT_* ("" = off)
    timeout_s: float = 10.0  # the hook's whole process group is killed after this
    fail_streak: int = 3  # this many failed beats in a row is an event
    env: tuple[str, ...] = ()  # scrubbed variables the hook still gets, e.g. ["NTFY_TOKEN"]


@record(eq=True, repr=False, slots=True)
class CoordinationConfig:
    """`[coordination]`: where claims, the pulse and the committed world are kept
    (docs/coordination.md)."""

    backend: str = "files"  # files: this machine only | etcd: shared by every host on the prefix
    endpoints: tuple[str, ...] = ("http://127.0.0.1:2379",)  # etcd client URLs, tried in turn
    prefix: str = ""  # etcd: the loop's keys live under this, e.g. "/looop/team-a"
    lease_ttl_s: float = 10.0  # a dead holder's claims (and a dead pulse) go after this
    timeout_s: float = 5.0  # one request to etcd; no answer in time counts as unavailable
    host_id: str = ""  # files only: etcd refuses it here (shared); $LOOOP_HOST_ID, state/host-id
    ca_cert: str = ""  # https: CA bundle to verify etcd with ("" = the system's)
    cert_cert: str = ""  # https: client certificate and its key, both or neither
    cert_key: str = ""
    username: str = ""  # etcd auth: a user, with its password in the variable below
    password_env: str = ""  # the environment variable holding that password (never the file)


@record(eq=True, repr=False, slots=True)
class RetentionConfig:
    """`[retention]`: how long history stays (beat/prune.py). A record goes once it is
    older than its `_s` or beyond the newest `_keep`; a round a report names, an ask a live
    round or a pending approval names, and the newest ask of each asker always stay."""

    rounds_s: float = 2592000.0  # finished rounds in rounds/done/: 30 days …
    rounds_keep: int = 500  # … and at most this many
    asks_s: float = 2592000.0  # answered and expired asks, with their answers: 30 days …
    asks_keep: int = 500  # … and at most this many (the page shows the newest 50)
    forged_s: float = 2592000.0  # refused forgeries kept for a human to read: 30 days …
    forged_keep: int = 100  # … and at most this many
    per_beat: int = 50  # records a beat deletes at most (`looop prune` deletes them all)


@record(eq=True, repr=False, slots=True)
class Config:
    """The whole looop.toml: one record per `[section]`."""

    sensors: SensorsConfig = field(default_factory=SensorsConfig)
    decider: DeciderConfig = field(default_factory=DeciderConfig)
    gates: GatesConfig = field(default_factory=GatesConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    # [actions.<kind>] command = "…", timeout_s = N: what a loop's approved action runs.
    # Kinds are the user's own names, so the table is kept as is and checked by
    # looop_py.engine.actions.action_commands.
    actions: dict[str, Any] = field(default_factory=dict)
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    # A table of named tables: [runtimes.claude], [runtimes.mine] …
    runtimes: dict[str, RuntimeConfig] = field(
        default_factory=dict, metadata={"table_of": RuntimeConfig}
    )
    env: EnvConfig = field(default_factory=EnvConfig)  # safety: see EnvConfig
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    coordination: CoordinationConfig = field(default_factory=CoordinationConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)


def load(path: Path, cache: Path | None = None, *, write_cache: bool = True) -> Config:
    """Read looop.toml; `cache` keeps the parsed table so unchanged files skip the TOML parser
    (with write_cache=False it is only read: `looop sense` writes nothing to state/).

    The cache is keyed on the file's stat, so any edit (even one that keeps the
    size) invalidates it, and it is written only after the table built a valid
    Config, so a cached table is always a good one.
    """
    try:
        stamp = list(jsonio.file_stamp(path))  # a list: the cache keeps it as JSON
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} is missing", "run `looop init` in the work dir") from exc
    table = _cached_table(cache, stamp) if cache else None
    fresh = table is None
    if table is None:
        table = _parse(path)
    try:
        config: Config = build(Config, table, where="")
        if fresh:  # a cached table passed these checks when it was cached
            from looop_py.workdir import bounds

            bounds.check(config)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", exc.hint) from None
    if fresh and cache is not None and write_cache:
        with contextlib.suppress(OSError, TypeError):
            cached = {"v": CACHE_VERSION, "stamp": stamp, "table": table}
            jsonio.atomic_write(cache, jsonio.dumps(cached))
    return config


CONFIG_CAP = 1024 * 1024  # looop.toml is read only if a regular file no bigger than this
CACHE_VERSION = 2  # 2: tables in the cache passed bounds.check


def _parse(path: Path) -> dict[str, Any]:
    import tomllib  # only when looop.toml changed since the cached parse

    try:
        data = jsonio.read_bounded(path, CONFIG_CAP)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} is missing", "run `looop init` in the work dir") from exc
    except CorruptFile as exc:
        raise ConfigError(exc.message, exc.hint) from None
    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ConfigError(f"{path}: {exc}", "fix the TOML syntax at that line") from None


def _cached_table(cache: Path, stamp: list[int]) -> dict[str, Any] | None:
    try:
        data = jsonio.read_json(cache)
    except Exception:
        return None
    if (
        isinstance(data, dict)
        and data.get("v") == CACHE_VERSION
        and data.get("stamp") == stamp
        and isinstance(data.get("table"), dict)
    ):
        table: dict[str, Any] = data["table"]
        return table
    return None


_SIMPLE = {
    "str": (str,),
    "bool": (bool,),
    "int": (int,),
    "float": (int, float),
}


def _check(value: Any, type_name: str, where: str) -> Any:
    optional = type_name.endswith(" | None")
    base = type_name.removesuffix(" | None")
    if value is None and optional:
        return None
    if base in _SIMPLE:
        ok = isinstance(value, _SIMPLE[base]) and not (base != "bool" and isinstance(value, bool))
        if ok:
            return float(value) if base == "float" else value
    elif base in {"list[str]", "tuple[str, ...]"}:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
    elif base == "dict[str, str]":
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return dict(value)
    elif base == "dict[str, Any]":
        if isinstance(value, dict):
            return dict(value)
    else:  # pragma: no cover - a field type this loader does not know is a bug here
        raise TypeError(f"config field {where} has unsupported type {type_name}")
    raise ConfigError(f"{where} should be {base}, got {type(value).__name__} {value!r}")


def build(cls: type[Any], table: Any, where: str) -> Any:
    """Build record `cls` from a TOML table, checking every key and type."""
    if not isinstance(table, dict):
        raise ConfigError(f"[{where}] should be a table")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(table) - set(known))
    if unknown:
        import difflib  # only to suggest the key a typo meant

        close = difflib.get_close_matches(unknown[0], list(known), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
        raise ConfigError(f"unknown key {_key(where, unknown[0])}", hint)
    values: dict[str, Any] = {}
    for name, value in table.items():
        f = known[name]
        table_of = f.metadata.get("table_of")
        nested = _nested_type(f)
        if table_of is not None:
            values[name] = _build_tables(table_of, value, _key(where, name))
        elif nested is not None:
            values[name] = build(nested, value, _key(where, name))
        else:
            values[name] = _check(value, str(f.type), _key(where, name))
    return cls(**values)


def _build_tables(cls: type[Any], table: Any, where: str) -> dict[str, Any]:
    """A table of named tables, e.g. [runtimes.NAME]: each name must be a safe segment."""

    if not isinstance(table, dict):
        raise ConfigError(f"[{where}] should be a table of tables, e.g. [{where}.NAME]")
    out: dict[str, Any] = {}
    for name, value in table.items():
        if not is_safe_segment(name):
            raise ConfigError(
                f"[{where}.{name}]: unsafe name", "use letters, digits, '.', '_' and '-'"
            )
        out[name] = build(cls, value, _key(where, name))
    return out


def _key(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _nested_type(f: Field[Any]) -> type[Any] | None:
    if f.default_factory is not MISSING:
        sample = f.default_factory()
        if is_dataclass(sample):
            return type(sample)
    return None
