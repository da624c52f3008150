"""codex's and pi's own retries bounded (workdir/cliretries.py), the user's settings first.

The real CLIs honouring these settings is the agents tier's (tests/agents/test_failures.py):
here, what looop adds to a command or writes, and above all what it leaves alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

from looop_py.workdir.cliretries import PI_RETRY, bound_codex, bound_pi, codex_provider

CODEX = "codex exec --json --sandbox read-only --skip-git-repo-check -"
FLAGS = "-c model_providers.fake.request_max_retries=0 -c model_providers.fake.stream_max_retries=2"


def codex_home(tmp_path: Path, config: str) -> dict[str, str]:
    home = tmp_path / "codex"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(config)
    return {"CODEX_HOME": str(home), "HOME": str(tmp_path)}


CUSTOM = 'model_provider = "fake"\n[model_providers.fake]\nbase_url = "http://x/v1"\n'


def test_codex_s_built_in_provider_is_left_alone_for_codex_refuses_overrides(
    tmp_path: Path,
) -> None:
    assert bound_codex(CODEX, {"HOME": str(tmp_path)}) == CODEX  # no config: openai
    env = codex_home(tmp_path, 'model_provider = "openai"\n')
    assert bound_codex(CODEX, env) == CODEX


def test_the_user_s_own_codex_retries_win(tmp_path: Path) -> None:
    env = codex_home(tmp_path, CUSTOM + "stream_max_retries = 9\n")
    assert bound_codex(CODEX, env) == CODEX
    mine = CODEX.replace(" -", " -c model_providers.fake.request_max_retries=5 -")
    assert bound_codex(mine, codex_home(tmp_path / "b", CUSTOM)) == mine


def test_an_unreadable_codex_config_or_another_command_is_left_alone(tmp_path: Path) -> None:
    env = codex_home(tmp_path, "model_provider = [not toml\n")
    assert bound_codex(CODEX, env) == CODEX
    custom = codex_home(tmp_path / "b", CUSTOM)
    for other in ("llm --no-stream -u", "mycodex exec -", "echo codex exec", "codex login"):
        assert bound_codex(other, custom) == other


def test_a_custom_codex_provider_gets_its_retries_bounded(tmp_path: Path) -> None:
    env = codex_home(tmp_path, CUSTOM)
    assert bound_codex(CODEX, env) == f"codex exec {FLAGS}" + CODEX[len("codex exec") :]
    path = "/opt/bin/codex exec - < 'p'"
    assert bound_codex(path, env) == f"/opt/bin/codex exec {FLAGS} - < 'p'"


def test_the_codex_provider_is_the_command_s_then_the_profile_s_then_the_config_s() -> None:
    config = {
        "model_provider": "a",
        "profile": "p",
        "profiles": {"p": {"model_provider": "b"}, "q": {"model_provider": "c"}},
    }
    assert codex_provider("codex exec -c model_provider=d -", config) == "d"
    assert codex_provider("codex exec --profile q -", config) == "c"
    assert codex_provider("codex exec -", config) == "b"
    assert codex_provider("codex exec -", {"model_provider": "a"}) == "a"
    assert codex_provider("codex exec -", {}) == "openai"


def pi_env(tmp_path: Path, settings: object | None) -> dict[str, str]:
    agent = tmp_path / "agent"
    agent.mkdir(parents=True)
    if settings is not None:
        (agent / "settings.json").write_text(json.dumps(settings))
    return {"PI_CODING_AGENT_DIR": str(agent), "HOME": str(tmp_path)}


PI = "pi -p --mode json --no-session @'/tmp/p.md'"


def test_the_user_s_own_pi_retry_settings_win(tmp_path: Path) -> None:
    cwd = tmp_path / "wd"
    cwd.mkdir()
    env = pi_env(tmp_path, {"defaultProvider": "x", "retry": {"enabled": True}})
    assert bound_pi(PI, cwd, env) is None
    assert not (cwd / ".pi").exists()


def test_a_project_s_own_pi_settings_are_never_overwritten(tmp_path: Path) -> None:
    cwd = tmp_path / "wd"
    (cwd / ".pi").mkdir(parents=True)
    (cwd / ".pi" / "settings.json").write_text('{"theme": "mine"}')
    assert bound_pi(PI, cwd, pi_env(tmp_path, {})) is None
    assert (cwd / ".pi" / "settings.json").read_text() == '{"theme": "mine"}'


def test_unreadable_pi_settings_or_another_command_write_nothing(tmp_path: Path) -> None:
    cwd = tmp_path / "wd"
    cwd.mkdir()
    env = pi_env(tmp_path, None)
    Path(env["PI_CODING_AGENT_DIR"], "settings.json").write_text("{not json")
    assert bound_pi(PI, cwd, env) is None
    clean = pi_env(tmp_path / "b", {})
    for other in ("codex exec -", "pip install x", "echo pi"):
        assert bound_pi(other, cwd, clean) is None
    assert not (cwd / ".pi").exists()
    (cwd / ".pi").write_text("a file where pi's directory would be")
    assert bound_pi(PI, cwd, pi_env(tmp_path / "c", {})) is None


def test_a_pi_decider_gets_its_retries_bounded_in_the_project_settings(tmp_path: Path) -> None:
    cwd = tmp_path / "wd"
    cwd.mkdir()
    for settings in (None, {"defaultProvider": "fake"}):  # no global settings, or no `retry`
        (cwd / ".pi" / "settings.json").unlink(missing_ok=True)
        home = tmp_path / str(settings is None)
        home.mkdir()
        written = bound_pi(PI, cwd, pi_env(home, settings))
        assert written == cwd / ".pi" / "settings.json"
        assert json.loads(written.read_text()) == {"retry": PI_RETRY}
        assert os.stat(written).st_mode & 0o777 == 0o644
