"""looop.toml → frozen dataclasses with documented defaults.

Each `[section]` of the file is one dataclass below; a key the file leaves out
keeps the default written here (and, commented, in the starter looop.toml).
A key of the wrong type or an unknown key is a ConfigError naming it, so a
typo never silently falls back to a default.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from looop_py import jsonio
from looop_py.errors import ConfigError

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class SensorsConfig:
    timeout_s: float = 60.0  # per sensor; a `# looop:timeout=N` header overrides it
    max_bytes: int = 8192  # stdout cap; more is reported as too-large, never stored
    concurrency: int = 8  # sensors running at once


@dataclass(frozen=True)
class DeciderConfig:
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


@dataclass(frozen=True)
class Config:
    sensors: SensorsConfig = field(default_factory=SensorsConfig)
    decider: DeciderConfig = field(default_factory=DeciderConfig)


def load(path: Path, cache: Path | None = None) -> Config:
    """Read looop.toml; `cache` keeps the parsed table so unchanged files skip the TOML parser.

    The cache is keyed on the file's stat, so any edit (even one that keeps the
    size) invalidates it, and it is written only after the table built a valid
    Config, so a cached table is always a good one.
    """
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise ConfigError(f"{path} is missing", "run `looop init` in the work dir") from exc
    stamp = [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]
    table = _cached_table(cache, stamp) if cache else None
    fresh = table is None
    if table is None:
        table = _parse(path)
    try:
        config: Config = build(Config, table, where="")
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", exc.hint) from None
    if fresh and cache is not None:
        with contextlib.suppress(OSError, TypeError):
            jsonio.atomic_write(cache, jsonio.dumps({"stamp": stamp, "table": table}))
    return config


def _parse(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_bytes().decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}", "fix the TOML syntax at that line") from exc


def _cached_table(cache: Path, stamp: list[int]) -> dict[str, Any] | None:
    try:
        data = jsonio.read_json(cache)
    except Exception:
        return None
    if (
        isinstance(data, dict)
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
    else:  # pragma: no cover - a field type this loader does not know is a bug here
        raise TypeError(f"config field {where} has unsupported type {type_name}")
    raise ConfigError(f"{where} should be {base}, got {type(value).__name__} {value!r}")


def build(cls: type[Any], table: Any, where: str) -> Any:
    """Build dataclass `cls` from a TOML table, checking every key and type."""
    if not isinstance(table, dict):
        raise ConfigError(f"[{where}] should be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(fields), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(fields)}"
        raise ConfigError(f"unknown key {_key(where, unknown[0])}", hint)
    values: dict[str, Any] = {}
    for name, value in table.items():
        f = fields[name]
        nested = _nested_type(f)
        if nested is not None:
            values[name] = build(nested, value, _key(where, name))
        else:
            values[name] = _check(value, str(f.type), _key(where, name))
    return cls(**values)


def _key(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _nested_type(f: dataclasses.Field[Any]) -> type[Any] | None:
    if f.default_factory is not dataclasses.MISSING:
        sample = f.default_factory()
        if dataclasses.is_dataclass(sample):
            return type(sample)
    return None
