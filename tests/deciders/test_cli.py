"""`looop decider test`, the backend registry, and `looop init` noticing agent CLIs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from looop_py.deciders import BACKENDS, FACTORIES, load
from looop_py.errors import ConfigError
from looop_py.workdir import config as config_mod
from looop_py.workdir import presets
from looop_py.workdir.config import Config, DeciderConfig
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop
from tests.fakeapi import FakeAPI, Reply, openai_completion


def test_decider_test_with_a_script_shows_move_usage_and_latency(wd: Paths) -> None:
    (wd.root / "moves.jsonl").write_text(
        json.dumps({"move": {"action": "noop"}, "usage": {"input_tokens": 7, "output_tokens": 3}})
    )
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.jsonl"\n')
    r = invoke_looop("-C", str(wd.root), "decider", "test", "--json")
    assert r.returncode == 0, r.stderr
    view = json.loads(r.stdout)
    assert view["ok"] is True and view["backend"] == "script"
    assert view["move"] == {"action": "noop"}
    assert view["usage"] == {
        "input_tokens": 7,
        "output_tokens": 3,
        "cost_usd": None,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 10,
    }
    assert isinstance(view["ms"], int)
    human = invoke_looop("-C", str(wd.root), "decider", "test")
    assert human.returncode == 0  # the exhausted script still answers a valid noop
    assert "latency" in human.stdout and "valid       yes" in human.stdout


def test_decider_test_shows_the_validation_error(wd: Paths) -> None:
    (wd.root / "moves.jsonl").write_text(json.dumps({"action": "write_goal", "id": "../etc"}))
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.jsonl"\n')
    r = invoke_looop("-C", str(wd.root), "decider", "test", "--json")
    assert r.returncode == 1
    view = json.loads(r.stdout)
    assert view["ok"] is False and "is not a safe name" in view["invalid"]


def test_decider_test_against_an_http_backend(wd: Paths) -> None:
    reply = Reply(
        200,
        openai_completion(
            json.dumps({"move": {"action": "noop", "reason": "decider test"}}),
            usage={"prompt_tokens": 40, "completion_tokens": 9},
        ),
    )
    with FakeAPI().reply(reply) as api:
        wd.config.write_text(
            f'[decider]\nbackend = "openai"\nmodel = "tiny"\nbase_url = "{api.base}/v1"\n'
            "usd_per_mtok_in = 1.0\nusd_per_mtok_out = 2.0\n"
        )
        r = invoke_looop("-C", str(wd.root), "decider", "test")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "40 in / 9 out tokens, $0.000058" in r.stdout
    assert "decider test" in api.requests[0].body["messages"][0]["content"]


def test_decider_test_reports_a_failing_backend(wd: Paths, tmp_path: Path) -> None:
    wd.config.write_text(
        '[decider]\nbackend = "command"\ncommand = "echo boom >&2; exit 2"\ntimeout_s = 5\n'
    )
    r = invoke_looop("-C", str(wd.root), "decider", "test", "--json")
    assert r.returncode == 1
    view = json.loads(r.stdout)
    assert "exited 2" in view["error"] and "boom" in view["error"]
    human = invoke_looop("-C", str(wd.root), "decider", "test")
    assert human.returncode == 1 and "error" in human.stdout


def test_decider_help_has_examples() -> None:
    for args in (["decider", "--help"], ["decider", "test", "--help"]):
        r = invoke_looop(*args)
        assert r.returncode == 0 and "Example" in r.stdout


def test_registry_and_default() -> None:
    assert Config().decider.backend == "rules"
    assert set(BACKENDS) >= {"rules", "command", "openai", "anthropic", "script", "noop"}
    with pytest.raises(ConfigError, match="unknown decider backend 'gpt'"):
        load(Config(decider=DeciderConfig(backend="gpt")))
    # The default loads with no key, no CLI, no network.
    assert load(Config()).name in ("rules", "noop")


def test_each_backend_is_built_by_its_own_factory_from_the_decider_table() -> None:
    assert tuple(FACTORIES) == BACKENDS
    for name in BACKENDS:
        cfg = DeciderConfig(backend=name, model="m", command="claude -p", script="moves.jsonl")
        assert load(Config(decider=cfg)).name == name
    with pytest.raises(ConfigError) as info:
        load(Config(decider=DeciderConfig(backend="gpt")))
    assert info.value.hint == f"choose one of: {', '.join(BACKENDS)}"


def test_config_keys_are_type_checked(tmp_path: Path) -> None:
    p = tmp_path / "looop.toml"
    p.write_text('[decider]\nbackend = "openai"\nmax_retries = "many"\n')
    with pytest.raises(ConfigError, match=r"decider\.max_retries should be int"):
        config_mod.load(p)
    p.write_text("[decider]\nusd_per_mtok_in = 3\nusd_per_mtok_out = 15.5\ntimeout_s = 30\n")
    cfg = config_mod.load(p).decider
    assert (cfg.usd_per_mtok_in, cfg.usd_per_mtok_out, cfg.timeout_s) == (3.0, 15.5, 30.0)


def _fake_bin(tmp_path: Path, *names: str) -> str:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for name in names:
        exe = bin_dir / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    # Only the fakes and the system dirs: CI puts the real agent CLIs on PATH.
    return os.pathsep.join([str(bin_dir), "/usr/bin", "/bin"])


def _uncomment(text: str, cli: str) -> str:
    """Activate one found block the way a user would: uncomment its setting lines."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# {cli} ("))
    out = list(lines)
    i = start + 1
    while i < len(lines) and lines[i].startswith("# ") and "=" in lines[i]:
        out[i] = lines[i][2:]
        i += 1
    return "\n".join(out) + "\n"


def test_init_offers_a_ready_block_for_each_agent_cli_on_path(tmp_path: Path) -> None:
    path = _fake_bin(tmp_path, "claude", "ollama", "codex")
    target = tmp_path / "ops"
    r = invoke_looop("init", str(target), "--json", env={"PATH": path})
    assert r.returncode == 0, r.stderr
    found = json.loads(r.stdout)["agent_clis"]
    assert found == ["claude", "codex", "ollama"]
    text = (target / "looop.toml").read_text()
    assert presets.MARKER not in text
    assert f"# claude ({tmp_path / 'fakebin' / 'claude'})" in text
    # No decider is active: the file still means the offline default; but workers get claude
    # (codex as root: claude refuses to run as root).
    loaded = config_mod.load(target / "looop.toml")
    assert loaded.decider == Config().decider
    assert loaded.workers.default_runtime == ("codex" if os.geteuid() == 0 else "claude")
    for cli, backend in (("claude", "command"), ("codex", "command"), ("ollama", "openai")):
        (tmp_path / "try.toml").write_text(_uncomment(text, cli))
        cfg = config_mod.load(tmp_path / "try.toml")
        assert cfg.decider.backend == backend, cli
        load(cfg)  # and the backend accepts the block as complete
    human = invoke_looop("init", str(tmp_path / "ops2"), env={"PATH": path})
    assert "found claude, codex, ollama on PATH" in human.stdout


def test_init_never_touches_an_existing_looop_toml(tmp_path: Path) -> None:
    target = tmp_path / "ops"
    target.mkdir()
    (target / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
    r = invoke_looop("init", str(target), "--json", env={"PATH": _fake_bin(tmp_path, "claude")})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["agent_clis"] == []
    assert (target / "looop.toml").read_text() == '[decider]\nbackend = "noop"\n'


def test_init_without_agent_clis_says_so(tmp_path: Path) -> None:
    text = presets.apply("[decider]\n# looop:agent-clis (marker)\n", [])
    assert "no agent CLI was found" in text and "marker" not in text
    assert presets.detect(str(tmp_path)) == []


@pytest.mark.parametrize(
    "clis,runtime",
    [(("ollama", "codex", "claude"), "claude"), (("pi", "codex"), "codex"), (("llm",), None)],
)
def test_init_gives_workers_the_first_agent_cli_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clis: tuple[str, ...], runtime: str | None
) -> None:
    from looop_py.workdir.template import init

    monkeypatch.setenv("PATH", _fake_bin(tmp_path, *clis).split(os.pathsep)[0])
    if runtime == "claude" and os.geteuid() == 0:
        runtime = "codex"  # claude refuses to run workers as root
    result = init(tmp_path / "ops")
    cfg = config_mod.load(tmp_path / "ops" / "looop.toml")
    assert result.default_runtime == cfg.workers.default_runtime == (runtime or "shell")
    if runtime:
        assert f"workers run on {runtime}" in result.runtime_note()
    else:
        assert "waits for your approval" in result.runtime_note()
    again = init(tmp_path / "ops")  # an existing looop.toml is never touched
    assert again.default_runtime == "shell" and again.agent_clis == ()


def test_init_as_root_does_not_pick_claude_which_refuses_root(tmp_path: Path) -> None:
    path = _fake_bin(tmp_path, "claude", "pi")
    assert presets.detect_runtime(path, root=True) == "pi"
    assert presets.detect_runtime(path, root=False) == "claude"
    (tmp_path / "only").mkdir()
    assert presets.detect_runtime(_fake_bin(tmp_path / "only", "claude"), root=True) is None
