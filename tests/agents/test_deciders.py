"""Each decider preset against its real CLI, the CLI talking only to the fake model server.

Skipped with the reason when a CLI is absent; under CI=true a missing CLI fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looop_py.workdir.paths import Paths
from looop_py.workdir.presets import PRESETS
from tests.agentclis import env_for
from tests.conftest import run_looop
from tests.fakemodel import FakeModel, Turn

pytestmark = [pytest.mark.agents, pytest.mark.slow, pytest.mark.timeout(180)]

CLIS = ("claude", "codex", "pi", "llm")
MOVE = {"action": "noop", "reason": "the fake model says noop"}
# What each CLI says about the fake server's 401, in its own words.
SAYS_401 = {
    "claude": "Invalid API key",
    "codex": "401 Unauthorized",
    "pi": "401 invalid x-api-key",
    "llm": "401 - invalid x-api-key",
}


def preset_command(cli: str) -> str:
    preset = next(p for p in PRESETS if p.cli == cli)
    line = next(s for s in preset.settings if s.startswith("command = "))
    command = json.loads(line.removeprefix("command = "))
    assert isinstance(command, str)
    return command


def configure(wd: Paths, cli: str, **extra: object) -> None:
    settings = {"timeout_s": 90, "max_retries": 0, **extra}
    lines = ["[decider]", 'backend = "command"', f"command = {json.dumps(preset_command(cli))}"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    wd.config.write_text("\n".join(lines) + "\n")


def looop(wd: Paths, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    p = run_looop("-C", str(wd.root), *args, env=env, timeout=150)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("cli", CLIS)
def test_decider_test_reads_the_move_and_the_usage_the_server_reported(
    cli: str, wd: Paths, tmp_path: Path
) -> None:
    with FakeModel(script=[Turn(text=json.dumps(MOVE))]) as model:
        env = env_for(cli, model, tmp_path / "home")
        configure(wd, cli)
        code, out, err = looop(wd, env, "decider", "test", "--json")
    assert code == 0, out + err
    check = json.loads(out)
    assert check["ok"], check
    assert check["move"] == MOVE
    assert check["usage"]["input_tokens"] == model.input_tokens > 0
    assert check["usage"]["output_tokens"] == model.output_tokens > 0
    if cli == "claude":  # claude prices tokens with its own table
        assert check["usage"]["cost_usd"] > 0
    if cli == "pi":  # pi prices them with models.json: $3 in, $15 out per million
        expected = (model.input_tokens * 3 + model.output_tokens * 15) / 1e6
        assert check["usage"]["cost_usd"] == pytest.approx(expected)


@pytest.mark.parametrize("cli", CLIS)
def test_a_forced_pulse_decides_from_the_real_envelope(cli: str, wd: Paths, tmp_path: Path) -> None:
    with FakeModel(script=[Turn(text=json.dumps(MOVE))]) as model:
        env = env_for(cli, model, tmp_path / "home")
        configure(wd, cli)
        code, out, err = looop(wd, env, "pulse", "--force", "--json")
    assert code == 0, out + err
    assert "the fake model says noop" in wd.journal.read_text()
    beat = json.loads(wd.events.read_text().splitlines()[-1])
    stats = json.dumps(beat)
    assert f'"input_tokens": {model.input_tokens}' in stats, stats


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("status", [401, 500])
def test_an_api_error_surfaces_the_cli_s_own_text(
    cli: str, status: int, wd: Paths, tmp_path: Path
) -> None:
    with FakeModel(script=[Turn(status=status)]) as model:
        env = env_for(cli, model, tmp_path / "home")
        configure(wd, cli)
        code, out, err = looop(wd, env, "pulse", "--force", "--json")
    assert code == 1, out + err
    journal = wd.journal.read_text()
    said = SAYS_401[cli] if status == 401 else "500" if cli != "codex" else "high demand"
    assert said in journal, journal
    assert said in json.loads(out).get("reason", out), out
    run = sorted((wd.root / "runs").iterdir())[-1]
    assert said in (run / "error.txt").read_text()
    if cli != "llm":  # llm says it on stderr; the others print an envelope kept in runs/
        assert (run / "output.txt").read_text().strip()


@pytest.mark.parametrize("cli", CLIS)
def test_a_transient_failure_is_retried(cli: str, wd: Paths, tmp_path: Path) -> None:
    with FakeModel(script=[Turn(text=json.dumps(MOVE))], fail_first=[429]) as model:
        env = env_for(cli, model, tmp_path / "home")
        configure(wd, cli, max_retries=2, backoff_s=0.1)
        code, out, err = looop(wd, env, "decider", "test", "--json")
    check = json.loads(out)
    assert code == 0 and check["ok"], out + err
    assert len(model.posts) == 2
    # llm's OpenAI client retries a 429 itself; the others are set not to, so looop does.
    assert check["meta"]["attempts"] == (1 if cli == "llm" else 2)


def test_claude_stream_json_with_verbose_decides_and_without_it_says_why(
    wd: Paths, tmp_path: Path
) -> None:
    with FakeModel(script=[Turn(text=json.dumps(MOVE))]) as model:
        env = env_for("claude", model, tmp_path / "home")
        stream = "claude -p --output-format stream-json --verbose"
        wd.config.write_text(f'[decider]\nbackend = "command"\ncommand = "{stream}"\n')
        code, out, _ = looop(wd, env, "decider", "test", "--json")
        assert code == 0 and json.loads(out)["move"] == MOVE
        assert json.loads(out)["meta"]["source"] == "claude-stream"
        bare = "claude -p --output-format stream-json"
        wd.config.write_text(f'[decider]\nbackend = "command"\ncommand = "{bare}"\n')
        code, out, _ = looop(wd, env, "decider", "test", "--json")
    assert "requires --verbose" in json.loads(out)["error"]


# What a model may answer that holds no usable move; the provider bills it all the same.
INVALID = {
    "prose": "I think the loop should wait and see what happens next.",
    "two-moves": json.dumps(MOVE) + "\n" + json.dumps(MOVE),
    "bad-json": '{"action": "noop", "reason": ',
}


@pytest.mark.parametrize("cli", CLIS)
@pytest.mark.parametrize("reply", sorted(INVALID))
def test_an_invalid_reply_is_charged_what_the_server_billed(
    cli: str, reply: str, wd: Paths, tmp_path: Path
) -> None:
    """The ledger equals the model server's own usage sums, for a reply holding no move too
    (before: the decide returned before the ledger, which stayed at 0 tokens)."""
    turn = Turn(text=INVALID[reply], input_tokens=1500, output_tokens=40, cached_tokens=1000)
    with FakeModel(script=[turn], sequential=True) as model:
        env = env_for(cli, model, tmp_path / "home")
        configure(wd, cli)
        code, out, err = looop(wd, env, "pulse", "--force", "--json")
    assert code == 1, out + err
    assert "rejected" in out or "JSON" in out or "object" in out, out
    spend = json.loads((wd.state / "spend.json").read_text())
    assert model.posts and model.input_tokens > 0
    assert spend["tokens"] == model.input_tokens + model.output_tokens, (spend, len(model.posts))
    assert spend["input_tokens"] == model.input_tokens
    assert spend["cache_read_tokens"] == model.cached_tokens
    assert spend["by_source"]["decider"]["charges"] == 1
