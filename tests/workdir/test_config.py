from __future__ import annotations

from pathlib import Path

import pytest

from looop_py.errors import ConfigError
from looop_py.workdir.config import Config, load
from looop_py.workdir.template import template_files


def test_starter_config_is_all_defaults(tmp_path: Path) -> None:
    text = dict(template_files())["looop.toml"]
    (tmp_path / "looop.toml").write_bytes(text)
    assert load(tmp_path / "looop.toml") == Config()


def test_values_and_int_to_float(tmp_path: Path) -> None:
    p = tmp_path / "looop.toml"
    p.write_text("[sensors]\ntimeout_s = 5\nmax_bytes = 100\n")
    cfg = load(p)
    assert cfg.sensors.timeout_s == 5.0 and isinstance(cfg.sensors.timeout_s, float)
    assert cfg.sensors.max_bytes == 100


@pytest.mark.parametrize(
    "text,needle",
    [
        ("[sensors]\nmax_bytes = 1.5\n", "sensors.max_bytes should be int"),
        ("[sensors]\nmax_bytes = true\n", "sensors.max_bytes should be int"),
        ("sensors = 3\n", "[sensors] should be a table"),
        ("[nope]\n", "unknown key nope"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, needle: str) -> None:
    p = tmp_path / "looop.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=None) as info:
        load(p)
    assert needle in str(info.value)


def test_cache_skips_parsing_until_the_file_changes(tmp_path: Path) -> None:
    from looop_py import jsonio

    p, cache = tmp_path / "looop.toml", tmp_path / "cache.json"
    p.write_text("[sensors]\ntimeout_s = 5\n")
    assert load(p, cache).sensors.timeout_s == 5.0
    stored = jsonio.read_json(cache)
    stored["table"]["sensors"]["timeout_s"] = 7  # prove the next load reads the cache
    jsonio.atomic_write(cache, jsonio.dumps(stored))
    assert load(p, cache).sensors.timeout_s == 7.0
    p.write_text("[sensors]\ntimeout_s = 9\n")  # same size, new stat
    assert load(p, cache).sensors.timeout_s == 9.0


def test_invalid_config_is_never_cached(tmp_path: Path) -> None:
    p, cache = tmp_path / "looop.toml", tmp_path / "cache.json"
    p.write_text("[sensors]\ntimeout_s = 'x'\n")
    with pytest.raises(ConfigError):
        load(p, cache)
    assert not cache.exists()
    cache.write_text("{garbage")
    p.write_text("[sensors]\ntimeout_s = 3\n")
    assert load(p, cache).sensors.timeout_s == 3.0
