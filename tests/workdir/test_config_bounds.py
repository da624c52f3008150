"""Every looop.toml value is checked on load: bad values are exit 2 with `looop.toml: key: why`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from looop_py.errors import ConfigError
from looop_py.workdir import bounds
from looop_py.workdir.config import Config, load
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop

NUMERIC = bounds.numeric_keys(Config)
BAD = {"zero": "0", "negative": "-1", "nan": "nan", "inf": "inf", "wrong-type": '"5"'}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "looop.toml"
    path.write_text(text)
    return path


def test_every_numeric_key_has_a_range() -> None:
    assert len(NUMERIC) >= 25
    assert sorted(NUMERIC) == sorted(bounds.RANGES)


def test_the_registries_named_in_bounds_match_their_owners() -> None:
    from looop_py.deciders import BACKENDS
    from looop_py.workers import runtimes

    assert set(bounds.BACKENDS) == set(BACKENDS)
    assert set(bounds.BUILTIN_RUNTIMES) == set(runtimes.BUILTINS)
    assert bounds.USAGE_KINDS == runtimes.USAGE_KINDS


def test_the_defaults_are_in_range() -> None:
    bounds.check(Config())


@pytest.mark.parametrize("bad", list(BAD), ids=list(BAD))
@pytest.mark.parametrize("key", NUMERIC)
def test_each_numeric_key_refuses_bad_values(tmp_path: Path, key: str, bad: str) -> None:
    section, name = key.split(".")
    rng = bounds.RANGES[key]
    if bad == "zero" and rng.zero is not None:
        load(_write(tmp_path, f"[{section}]\n{name} = 0\n"))  # 0 has a documented meaning
        return
    if bad == "negative" and rng.low < 0:  # pragma: no cover - no range allows negatives
        return
    with pytest.raises(ConfigError) as info:
        load(_write(tmp_path, f"[{section}]\n{name} = {BAD[bad]}\n"))
    text = str(info.value)
    assert f"looop.toml: {key}" in text, text


@pytest.mark.parametrize("key", NUMERIC)
def test_each_numeric_key_refuses_values_past_its_maximum(tmp_path: Path, key: str) -> None:
    section, name = key.split(".")
    high = bounds.RANGES[key].high
    too_big = int(high) + 1 if float(high).is_integer() else high * 2
    with pytest.raises(ConfigError, match=f"{key}: must be"):
        load(_write(tmp_path, f"[{section}]\n{name} = {too_big}\n"))
    load(_write(tmp_path, f"[{section}]\n{name} = {int(high) if high >= 1 else high}\n"))


@pytest.mark.parametrize(
    "text,needle",
    [
        ('[workers]\ndefault_runtime = "nope"\n', "workers.default_runtime: unknown runtime"),
        ('[decider]\nbackend = "gpt"\n', "decider.backend: unknown backend"),
        ('[decider]\nbackend = "command"\n', "decider.command: the command backend needs"),
        ('[decider]\nbackend = "script"\n', "decider.script: the script backend needs"),
        ('[decider]\ncache_ttl = "2h"\n', "decider.cache_ttl: must be one of 5m, 1h"),
        ("[decider]\nusd_per_mtok_cached_in = -1\n", "decider.usd_per_mtok_cached_in: must"),
        ("[runtimes.mine]\ncommand = 'mytool'\n", "runtimes.mine.command: does not hold"),
        ("[actions.open-pr]\ncommand = 5\n", "actions.open-pr.command: should be a non-empty"),
        ("[actions.open-pr]\ncommand = ''\n", "actions.open-pr.command: should be a non-empty"),
        ("[actions.open-pr]\ncommand = 'x'\ntimeout_s = nan\n", "actions.open-pr.timeout_s: must"),
        ("[actions.open-pr]\ncommand = 'x'\ntimeout_s = 0\n", "actions.open-pr.timeout_s: must"),
        (
            "[actions.open-pr]\ncommand = 'x'\ntimeout_s = '5'\n",
            "actions.open-pr.timeout_s: should",
        ),
        ("[actions.open-pr]\ncommand = 'x'\nretries = 2\n", "actions.open-pr.retries: unknown"),
        ("[actions]\nopen-pr = 5\n", "actions.open-pr: should be a table"),
    ],
)
def test_names_and_tables_are_checked(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(_write(tmp_path, text))
    assert needle in str(info.value)


def test_good_names_and_tables_load(tmp_path: Path) -> None:
    cfg = load(
        _write(
            tmp_path,
            '[workers]\ndefault_runtime = "mine"\n'
            "[runtimes.mine]\ncommand = 'mytool {{prompt_file}}'\n"
            "[actions.open-pr]\ncommand = 'gh pr create'\ntimeout_s = 60\n"
            "[actions]\nnote = 'echo hi'\n",
        )
    )
    assert cfg.workers.default_runtime == "mine"


def test_a_bad_value_is_exit_2_for_every_command_and_names_the_key(wd: Paths) -> None:
    wd.config.write_text("[sensors]\ntimeout_s = nan\n")
    for args in (["pulse"], ["status"], ["sense"]):
        out = invoke_looop("-C", str(wd.root), *args)
        assert out.returncode == 2, (args, out.stderr)
        assert "looop.toml: sensors.timeout_s: must be a finite number" in out.stderr


def test_a_cached_table_from_before_the_checks_is_checked_again(wd: Paths) -> None:
    from looop_py import jsonio

    wd.config.write_text("[sensors]\ntimeout_s = 0\n")
    st = wd.config.stat()
    stamp = [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]
    table = {"sensors": {"timeout_s": 0}}
    wd.config_cache.write_bytes(jsonio.dumps({"stamp": stamp, "table": table}))  # no "v"
    with pytest.raises(ConfigError, match=r"sensors\.timeout_s: must be"):
        load(wd.config, wd.config_cache)


def test_the_starter_file_states_every_range() -> None:
    starter = (Path(__file__).parents[2] / "template" / "looop.toml").read_text()
    lines: dict[str, str] = {}
    section = ""
    for line in starter.splitlines():
        if m := re.match(r"^\[(\w+)\]", line):
            section = m.group(1)
        elif m := re.match(r"^#\s*(\w+)\s*=", line):
            lines.setdefault(f"{section}.{m.group(1)}", line)
    for key in NUMERIC:
        assert "range " in lines.get(key, ""), f"the starter looop.toml states no range for {key}"
