"""The real agent CLIs, each pointed at a FakeModel through environment and files in a temp dir.

`.ci/run` installs pinned versions (npm into ~/.cache/looop-ci/npm, llm into the venv,
aider into ~/.cache/looop-ci/aider-venv); `find(cli)` looks on PATH and in that cache.
A test of the `agents` tier calls `need(cli)`: without the CLI it is skipped with the
reason, unless CI=true, where a missing CLI fails.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.fakemodel import FakeModel

CACHE = Path(os.environ.get("LOOOP_CI_CACHE", Path.home() / ".cache" / "looop-ci"))
# The npm cache .ci/run fills, the venv running the tests (llm), a venv of llm's own.
SEARCH = (
    CACHE / "npm" / "node_modules" / ".bin",
    Path(sys.executable).parent,
    CACHE / "llm-venv" / "bin",
    CACHE / "aider-venv" / "bin",
)
VERSIONS = {
    "claude": "2.1.197",
    "codex": "0.169.0",
    "pi": "0.73.1",
    "llm": "0.36",
    "aider": "0.86.2",
}
KEY = "sk-fake-key"


def find(cli: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *map(str, SEARCH)])
    return shutil.which(cli, path=path)


def need(cli: str) -> str:
    where = find(cli)
    if where is None:
        why = f"{cli} is not installed (.ci/run installs {cli} {VERSIONS.get(cli, '')})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    return where


# The key each CLI reads from its environment; looop scrubs *_API_KEY from workers unless
# `[runtimes.NAME] env` passes it on.
KEY_ENV = {
    "claude": "ANTHROPIC_API_KEY",
    "codex": "FAKE_API_KEY",
    "llm": "OPENAI_API_KEY",
    "aider": "OPENAI_API_KEY",
}


def runtime_toml(cli: str) -> str:
    """looop.toml lines that let a worker on `cli` see its key."""
    key = KEY_ENV.get(cli)
    return f'\n[runtimes.{cli}]\nenv = ["{key}"]\n' if key else ""


def env_for(cli: str, model: FakeModel, home: Path) -> dict[str, str]:
    """Environment (and files under `home`) that point `cli` at `model` and nowhere else.

    Only where to go and which key: every retry, timeout and traffic setting stays at the
    CLI's default, as a user runs it (looop's own AGENT_CLI_ENV is what bounds them)."""
    where = need(cli)
    home.mkdir(parents=True, exist_ok=True)
    base = model.base
    env = {
        "PATH": os.pathsep.join([str(Path(where).parent), os.environ.get("PATH", "")]),
        "HOME": str(home),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    if cli == "claude":
        env |= {
            "ANTHROPIC_BASE_URL": base,
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_MODEL": "claude-fake",
            "ANTHROPIC_SMALL_FAST_MODEL": "claude-fake",
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        }
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"  # the documented way to allow skip-permissions as root
    elif cli == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "gpt-fake"\nmodel_provider = "fake"\n'
            "[model_providers.fake]\n"
            'name = "fake"\n'
            f'base_url = "{base}/v1"\n'
            'env_key = "FAKE_API_KEY"\n'
            'wire_api = "responses"\n'
        )
        env |= {"CODEX_HOME": str(codex_home), "FAKE_API_KEY": KEY}
    elif cli == "pi":
        agent = home / ".pi" / "agent"
        agent.mkdir(parents=True, exist_ok=True)
        (agent / "models.json").write_text(
            json.dumps({"providers": {"fake": PI_PROVIDER | {"baseUrl": f"{base}/v1"}}})
        )
        (agent / "settings.json").write_text(json.dumps(PI_SETTINGS))
        env |= {"PI_CODING_AGENT_DIR": str(agent)}
    elif cli == "llm":
        user = home / "llm"
        user.mkdir(exist_ok=True)
        (user / "extra-openai-models.yaml").write_text(
            f"- model_id: fake\n  model_name: gpt-fake\n  api_base: {base}/v1\n"
        )
        (user / "default_model.txt").write_text("fake")
        env |= {"LLM_USER_PATH": str(user), "OPENAI_API_KEY": KEY}
    elif cli == "aider":
        # aider looks a model up in ~/.aider.model.metadata.json before it would fetch
        # litellm's price list from GitHub; listed there, the fake model has a price too.
        (home / ".aider.model.metadata.json").write_text(json.dumps({AIDER_MODEL: AIDER_INFO}))
        env |= {"OPENAI_API_BASE": f"{base}/v1", "OPENAI_API_KEY": KEY, "AIDER_MODEL": AIDER_MODEL}
    return env


# Costs per million tokens, so pi reports a cost the test can check.
PI_COST = {"input": 3.0, "output": 15.0, "cacheRead": 0.0, "cacheWrite": 0.0}
PI_PROVIDER = {
    "api": "openai-completions",
    "apiKey": KEY,
    "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
    "models": [{"id": "gpt-fake", "name": "fake", "reasoning": False, "cost": PI_COST}],
}
PI_SETTINGS = {"defaultProvider": "fake", "defaultModel": "gpt-fake"}

AIDER_MODEL = "openai/gpt-fake"  # litellm's openai provider, at OPENAI_API_BASE
AIDER_INFO = {
    "max_input_tokens": 128000,
    "max_output_tokens": 4096,
    "input_cost_per_token": PI_COST["input"] / 1e6,
    "output_cost_per_token": PI_COST["output"] / 1e6,
    "litellm_provider": "openai",
    "mode": "chat",
}
