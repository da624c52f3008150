"""codex's and pi's own retries bounded (workdir/cliretries.py), the user's settings first.

The real CLIs honouring these settings is the agents tier's (tests/agents/test_failures.py):
here, what looop adds to a command or writes, and above all what it leaves alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

from looop_py.workdir.cliretries import (
    PI_AGENT,
    PI_RETRY,
    bound_codex,
    bound_pi,
    codex_provider,
)

CODEX = "codex exec --json --sandbox read-only --skip-git-repo-check -"
FLAGS = "-c model_providers.fake.request_max_retries=0 -c model_providers.fake.stream_max_retries=2"


def codex_home(tmp_path: Path, config: str) -> dict[str, str]:
    home = tmp_path / "codex"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(config)
    return {"CODEX_HOME": str(home), "HOME": str(tmp_path)}


CUSTOM = 'model_provider = "fake"\n[model_providers.fake]\nbase_url = "http://x/v1"\n'


def test_codex_s_own_openai_is_left_alone_where_a_mirror_would_not_be_the_same(
    tmp_path: Path,
) -> None:
    chatgpt = codex_home(tmp_path, "")
    Path(chatgpt["CODEX_HOME"], "auth.json").write_text('{"tokens": {"id_token": "x"}}')
    assert bound_codex(CODEX, chatgpt) == CODEX  # a ChatGPT login: not verifiable here
    garbled = codex_home(tmp_path / "g", "")
    Path(garbled["CODEX_HOME"], "auth.json").write_text("{not json")
    assert bound_codex(CODEX, garbled) == CODEX
    profiled = codex_home(tmp_path / "p", 'profile = "work"\n[profiles.work]\nmodel = "m"\n')
    assert bound_codex(CODEX, profiled) == CODEX  # a profile's provider outranks -c
    plain = {"HOME": str(tmp_path / "h")}
    for other in ("codex exec --profile work -", "codex exec --oss -"):
        assert bound_codex(other, plain) == other
    assert bound_codex(CODEX, {**plain, "CODEX_ACCESS_TOKEN": "t"}) == CODEX
    ollama = codex_home(tmp_path / "o", 'model_provider = "ollama"\n')
    assert bound_codex(CODEX, ollama) == CODEX  # built in, and codex refuses overrides


def test_codex_s_own_openai_runs_as_looop_s_mirror_with_its_retries_bounded(
    tmp_path: Path,
) -> None:
    m = "model_providers.looop-openai"
    mirror = (
        f"-c model_provider=looop-openai -c {m}.name=OpenAI -c {m}.wire_api=responses"
        f" -c {m}.requires_openai_auth=true -c '{m}.env_http_headers="
        '{OpenAI-Organization="OPENAI_ORGANIZATION",OpenAI-Project="OPENAI_PROJECT"}\''
    )
    bounded = f"-c {m}.request_max_retries=0 -c {m}.stream_max_retries=2"
    rest = CODEX[len("codex exec") :]
    for env in (
        {"HOME": str(tmp_path)},  # no config: codex's openai
        codex_home(tmp_path / "a", 'model_provider = "openai"\n'),
        codex_home(tmp_path / "k", ""),  # a key in auth.json, no ChatGPT tokens
    ):
        Path(env.get("CODEX_HOME", tmp_path), "auth.json").write_text('{"OPENAI_API_KEY": "k"}')
        assert bound_codex(CODEX, env) == f"codex exec {mirror} {bounded}{rest}"
    based = codex_home(tmp_path / "b", 'openai_base_url = "http://proxy:8/v1"\n')
    url = f"-c '{m}.base_url=\"http://proxy:8/v1\"'"
    assert bound_codex(CODEX, based) == f"codex exec {mirror} {url} {bounded}{rest}"


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
    env = pi_env(tmp_path, {"defaultProvider": "x", "retry": {"enabled": True}})
    state = tmp_path / "state"
    assert bound_pi(PI, env, state) == env
    assert not state.exists()


def test_unreadable_pi_settings_or_another_command_change_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = pi_env(tmp_path, None)
    Path(env["PI_CODING_AGENT_DIR"], "settings.json").write_text("{not json")
    assert bound_pi(PI, env, state) == env
    clean = pi_env(tmp_path / "b", {})
    for other in ("codex exec -", "pip install x", "echo pi"):
        assert bound_pi(other, clean, state) == clean
    assert not state.exists()
    state.write_text("a file where state/ would be")  # cannot be made: pi at its defaults
    assert bound_pi(PI, clean, state) == clean


def test_pi_runs_with_looop_s_agent_dir_which_links_the_user_s_and_copies_no_secret(
    tmp_path: Path,
) -> None:
    env = pi_env(tmp_path, {"defaultProvider": "fake", "defaultModel": "m"})
    user = Path(env["PI_CODING_AGENT_DIR"])
    (user / "auth.json").write_text('{"anthropic": {"key": "sk-secret"}}')
    (user / "models.json").write_text('{"providers": {}}')
    (user / "extensions").mkdir()
    state = tmp_path / "state"
    got = bound_pi(PI, env, state)
    ours = state / PI_AGENT
    assert got == {**env, "PI_CODING_AGENT_DIR": str(ours)}
    settings = json.loads((ours / "settings.json").read_text())
    assert settings == {"defaultProvider": "fake", "defaultModel": "m", "retry": PI_RETRY}
    for name in ("auth.json", "models.json", "extensions"):
        assert (ours / name).is_symlink() and os.readlink(ours / name) == str(user / name)
    assert os.stat(ours).st_mode & 0o777 == 0o700
    secret = [p for p in ours.rglob("*") if not p.is_symlink() and "sk-secret" in p.read_text()]
    assert secret == []


def test_looop_s_pi_agent_dir_follows_the_user_s_as_it_changes(tmp_path: Path) -> None:
    env = pi_env(tmp_path, {"defaultModel": "m"})
    user = Path(env["PI_CODING_AGENT_DIR"])
    (user / "models.json").write_text("{}")
    state = tmp_path / "state"
    bound_pi(PI, env, state)
    ours = state / PI_AGENT
    (ours / "auth.json").write_text("{}")  # what pi makes where it finds no auth.json
    (user / "models.json").unlink()
    (user / "auth.json").write_text('{"k": 1}')
    (user / "settings.json").write_text('{"defaultModel": "n"}')
    bound_pi(PI, env, state)
    assert not (ours / "models.json").exists() and not (ours / "models.json").is_symlink()
    assert (ours / "auth.json").is_symlink() and (ours / "auth.json").read_text() == '{"k": 1}'
    assert json.loads((ours / "settings.json").read_text())["defaultModel"] == "n"
    # the user bounds pi's retries later: from then on pi runs on the user's own dir
    (user / "settings.json").write_text('{"retry": {"maxRetries": 0}}')
    assert bound_pi(PI, env, state) == env


def test_without_any_pi_settings_of_the_user_s_only_the_bound_is_set(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}  # no ~/.pi/agent at all
    got = bound_pi(PI, env, tmp_path / "state")
    ours = Path(got["PI_CODING_AGENT_DIR"])
    assert json.loads((ours / "settings.json").read_text()) == {"retry": PI_RETRY}
    assert sorted(p.name for p in ours.iterdir()) == ["settings.json"]


def test_pi_starts_at_once_all_get_the_bound_and_one_consistent_agent_dir(
    tmp_path: Path,
) -> None:
    """A decider and several workers starting together: no start falls back to pi's own
    retries because another was linking the same entries."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    env = pi_env(tmp_path, {"defaultModel": "m"})
    user = Path(env["PI_CODING_AGENT_DIR"])
    for name in ("auth.json", "models.json", "AGENTS.md"):
        (user / name).write_text("{}")
    state = tmp_path / "state"
    spawn = multiprocessing.get_context("spawn")  # fresh processes, as separate starts are
    with ProcessPoolExecutor(max_workers=6, mp_context=spawn) as pool:
        got = list(pool.map(bound_pi, [PI] * 24, [env] * 24, [state] * 24))
    assert all(g["PI_CODING_AGENT_DIR"] == str(state / PI_AGENT) for g in got)
    ours = sorted(p.name for p in (state / PI_AGENT).iterdir())
    assert ours == ["AGENTS.md", "auth.json", "models.json", "settings.json"]
