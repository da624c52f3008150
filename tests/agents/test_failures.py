"""Each decider CLI at its default settings against a failing provider, as a user runs it.

Per CLI × failure (401, persistent 500 / 529, 429 with Retry-After, a cut stream, a
hang, an invalid reply) one forced pulse: the number of requests the fake model server
saw, the seconds the beat took, and what the user sees (the pulse's reason, the journal,
`looop status`). Nothing here sets a CLI's retries: what bounds them is looop's own
AGENT_CLI_ENV (workdir/environ.py), so these are the numbers a user gets.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from looop_py.spend import ledger
from looop_py.workdir.cliretries import PI_RETRY
from looop_py.workdir.paths import Paths
from tests.agentclis import KEY, PI_SETTINGS, env_for
from tests.agents.test_deciders import MOVE, preset_command
from tests.conftest import open_wd, run_looop
from tests.fakemodel import FakeModel, Turn

pytestmark = [pytest.mark.agents, pytest.mark.slow, pytest.mark.timeout(180)]

HANG_S = 8  # [decider] timeout_s for the hang: the beat gives up there
INVALID = "I would do nothing right now."

# What each CLI says about a bad key: the provider's own words, or the CLI's where it hides them.
SAYS_401 = {
    "claude": "Invalid API key",
    "codex": "401 Unauthorized: invalid x-api-key",
    "pi": "401 invalid x-api-key",
    "llm": "401 - invalid x-api-key",
}
SAYS_5XX = {
    500: {"claude": "500 internal error", "codex": "high demand", "pi": "500 internal error"},
    529: {"claude": "529 overloaded", "codex": "529", "pi": "529 overloaded"},
}
# Requests one beat makes against a provider failing every request: 3 on every CLI, as users
# run them. claude at looop's CLAUDE_CODE_MAX_RETRIES=2, llm's OpenAI client at its default;
# codex (30 at its defaults) and pi (12) through workdir/cliretries.py. A decide no longer
# multiplies them (it was 5× that).
PERSISTENT = {"claude": 3, "llm": 3, "pi": 3, "codex": 3}
SLOW_S: dict[str, float] = {}  # pi waits 2 + 4 s between its tries: about 8 s a beat
SAYS_CUT = {"codex": "stream disconnected", "pi": "terminated", "llm": "Connection error"}


def forced_pulse(
    wd: Paths,
    cli: str,
    model: FakeModel,
    home: Path,
    *,
    timeout_s: float = 60,
    env: dict[str, str] | None = None,
    limits: str = "",
) -> tuple[dict[str, Any], float]:
    """One `looop pulse --force` with the CLI's preset; (its JSON, the seconds it took)."""
    env = env or env_for(cli, model, home)
    command = json.dumps(preset_command(cli))
    wd.config.write_text(
        f'[decider]\nbackend = "command"\ncommand = {command}\ntimeout_s = {timeout_s}\n'
        + (f"[limits]\n{limits}\n" if limits else "")
    )
    started = time.monotonic()
    p = run_looop("-C", str(wd.root), "pulse", "--force", "--json", env=env, timeout=150)
    took = time.monotonic() - started
    assert p.stdout, p.stderr
    return json.loads(p.stdout), took


def charged_what_the_server_billed(wd: Paths, model: FakeModel) -> None:
    """The ledger equals the model server's own usage sums: tokens, prompt tokens, cached
    (of the replies whose usage it sent: a cut one's never reaches any client)."""
    spend = ledger.load(open_wd(wd))
    assert spend.tokens == model.input_tokens + model.output_tokens, (spend, len(model.posts))
    assert spend.cache_read_tokens == model.cached_tokens, spend


def user_sees(wd: Paths, out: dict[str, Any], said: str) -> None:
    """`said` in the pulse's reason, the journal and `looop status`, within that beat."""
    assert said in out.get("reason", ""), out
    assert said in wd.journal.read_text(), wd.journal.read_text()[-800:]
    status = run_looop("-C", str(wd.root), "status").stdout
    assert said in status, status


@pytest.mark.parametrize("cli", ["claude", "codex", "pi", "llm"])
def test_a_bad_key_is_reported_in_the_provider_s_words_within_30s(
    cli: str, wd: Paths, tmp_path: Path
) -> None:
    with FakeModel(script=[Turn(status=401)]) as model:
        started = time.monotonic()
        out, took = forced_pulse(wd, cli, model, tmp_path / "home")
    user_sees(wd, out, SAYS_401[cli])
    charged_what_the_server_billed(wd, model)
    # claude's default retried it ~3 minutes; when it is slow, say where the time went
    tries = [round(seen.at - started, 2) for seen in model.posts]
    assert took <= 30, (took, "requests at (s)", tries, "beat", out.get("ms"), out.get("reason"))
    assert len(model.posts) <= 3, len(model.posts)


@pytest.mark.parametrize("status", [500, 529])
@pytest.mark.parametrize("cli", ["claude", "codex", "pi", "llm"])
def test_a_provider_failing_every_request_costs_a_bounded_beat(
    cli: str, status: int, wd: Paths, tmp_path: Path
) -> None:
    with FakeModel(script=[Turn(status=status)]) as model:
        out, took = forced_pulse(wd, cli, model, tmp_path / "home")
    assert out["outcome"] == "failed", out
    assert len(model.posts) == PERSISTENT[cli], len(model.posts)  # was 5× for codex, llm
    assert took <= SLOW_S.get(cli, 30), took
    user_sees(wd, out, SAYS_5XX[status].get(cli, f"{status} - "))
    charged_what_the_server_billed(wd, model)


@pytest.mark.parametrize("cli", ["codex", "pi"])
def test_the_user_s_own_retry_settings_win_over_looop_s(
    cli: str, wd: Paths, tmp_path: Path
) -> None:
    """codex's and pi's retries are bounded in their own config files; where the user set
    them there, looop adds nothing: 1 retry is 2 requests, not looop's 3."""
    with FakeModel(script=[Turn(status=500)]) as model:
        home = tmp_path / "home"
        env = env_for(cli, model, home)
        if cli == "codex":
            with (home / ".codex" / "config.toml").open("a") as f:
                f.write("request_max_retries = 1\nstream_max_retries = 0\n")
        else:
            mine = PI_SETTINGS | {"retry": {"maxRetries": 1, "provider": {"maxRetries": 0}}}
            (home / ".pi" / "agent" / "settings.json").write_text(json.dumps(mine))
        out, _ = forced_pulse(wd, cli, model, home, env=env)
    assert out["outcome"] == "failed", out
    assert len(model.posts) == 2, len(model.posts)
    assert not (wd.root / ".pi").exists()  # nothing written over the user's retry
    assert not (wd.state / "pi-agent").exists()


def test_a_pi_decider_runs_on_looop_s_agent_dir_with_the_user_s_model_and_nothing_in_the_wd(
    wd: Paths, tmp_path: Path
) -> None:
    """pi runs with PI_CODING_AGENT_DIR = state/pi-agent: the user's settings plus `retry`,
    their models.json a symlink (so their provider and model apply), nothing written in the
    work dir; a later beat against a failing provider makes 3 requests."""
    with FakeModel(script=[Turn(text=json.dumps(MOVE))]) as model:
        out, _ = forced_pulse(wd, "pi", model, tmp_path / "home")
    assert out["outcome"] == "decided", out
    assert model.posts[0].body["model"] == "gpt-fake"  # the user's defaultModel
    assert not (wd.root / ".pi").exists()
    ours = wd.state / "pi-agent"
    assert json.loads((ours / "settings.json").read_text()) == PI_SETTINGS | {"retry": PI_RETRY}
    assert (ours / "models.json").is_symlink()
    with FakeModel(script=[Turn(status=529)]) as model:
        out, _ = forced_pulse(wd, "pi", model, tmp_path / "home2")
    assert out["outcome"] == "failed", out
    assert len(model.posts) == 3, len(model.posts)


def codex_on_openai(model: FakeModel, home: Path) -> dict[str, str]:
    """codex as most users run it: its built-in `openai` provider and an OPENAI_API_KEY,
    pointed at the fake server by codex's own `openai_base_url` setting."""
    env = env_for("codex", model, home)
    (home / ".codex" / "config.toml").write_text(
        f'model = "gpt-fake"\nopenai_base_url = "{model.base}/v1"\n'
    )
    del env["FAKE_API_KEY"]
    return env | {"OPENAI_API_KEY": KEY}


def test_codex_on_its_built_in_openai_provider_makes_3_requests_a_failing_beat(
    wd: Paths, tmp_path: Path
) -> None:
    """codex refuses overrides of its `openai` provider and reads no retry variable (30
    requests a failing beat): looop runs it on a mirror table with the retries bounded.
    The same provider answers a good beat, charged what the server billed."""
    with FakeModel(script=[Turn(text=json.dumps(MOVE), cached_tokens=100)]) as model:
        env = codex_on_openai(model, tmp_path / "home")
        out, _ = forced_pulse(wd, "codex", model, tmp_path / "home", env=env)
    assert out["outcome"] == "decided", out
    assert len(model.posts) == 1 and model.posts[0].body["model"] == "gpt-fake"
    spend = ledger.load(open_wd(wd))
    assert spend.tokens == model.input_tokens + model.output_tokens
    assert spend.input_tokens == model.input_tokens
    assert spend.cache_read_tokens == model.cached_tokens == 100
    with FakeModel(script=[Turn(status=500)]) as model:
        env = codex_on_openai(model, tmp_path / "home2")
        out, took = forced_pulse(wd, "codex", model, tmp_path / "home2", env=env)
    assert out["outcome"] == "failed", out
    assert len(model.posts) == 3, len(model.posts)  # 30 on codex's own openai provider
    assert took <= 30, took
    user_sees(wd, out, SAYS_5XX[500]["codex"])


@pytest.mark.parametrize("cli", ["claude", "codex", "pi", "llm"])
def test_a_429_with_retry_after_is_waited_out_within_the_beat(
    cli: str, wd: Paths, tmp_path: Path
) -> None:
    limited = Turn(status=429, retry_after="2")
    with FakeModel(script=[Turn(text=json.dumps(MOVE))], fail_first=[limited]) as model:
        out, took = forced_pulse(wd, cli, model, tmp_path / "home")
    assert out["outcome"] == "decided", out
    assert "the fake model says noop" in wd.journal.read_text()
    assert len(model.posts) == 2, len(model.posts)  # one refused, one answered: no looop retry
    charged_what_the_server_billed(wd, model)
    assert took <= 20, took


@pytest.mark.parametrize("cli", ["claude", "codex", "pi", "llm"])
def test_a_stream_cut_every_time_fails_the_beat_in_the_cli_s_words(
    cli: str, wd: Paths, tmp_path: Path
) -> None:
    with FakeModel(script=[Turn(text=json.dumps(MOVE), cut=True)]) as model:
        out, took = forced_pulse(wd, cli, model, tmp_path / "home")
    assert took <= SLOW_S.get(cli, 30), took
    if cli == "claude":  # claude falls back to a whole (unstreamed) reply, which arrives
        assert out["outcome"] == "decided", out
        assert len(model.posts) == 2
        charged_what_the_server_billed(wd, model)
        return
    assert out["outcome"] == "failed", out
    assert len(model.posts) <= 3, len(model.posts)  # codex 6, pi 4 at their defaults
    user_sees(wd, out, SAYS_CUT[cli])
    charged_what_the_server_billed(wd, model)
    assert model.cut_tokens > 0  # billed, perhaps, and told to nobody: see cut_tokens


@pytest.mark.parametrize("cli", ["claude", "codex", "pi", "llm"])
def test_a_hanging_provider_costs_timeout_s_and_says_so(
    cli: str, wd: Paths, tmp_path: Path
) -> None:
    with FakeModel(script=[Turn(hang=True)]) as model:
        out, took = forced_pulse(wd, cli, model, tmp_path / "home", timeout_s=HANG_S)
    assert HANG_S <= took <= HANG_S + 10, took
    assert len(model.posts) <= 2, len(model.posts)
    user_sees(wd, out, f"no answer within {HANG_S}s")
    charged_what_the_server_billed(wd, model)


@pytest.mark.parametrize("cli", ["claude", "codex", "pi", "llm"])
def test_an_invalid_reply_is_asked_once_and_named(cli: str, wd: Paths, tmp_path: Path) -> None:
    with FakeModel(script=[Turn(text=INVALID)]) as model:
        out, took = forced_pulse(wd, cli, model, tmp_path / "home")
    assert out["outcome"] == "failed", out
    assert len(model.posts) == 1, len(model.posts)
    assert took <= 30, took
    user_sees(wd, out, "no JSON object in the reply")
    charged_what_the_server_billed(wd, model)


@pytest.mark.parametrize("cli", ["claude", "codex", "pi", "llm"])
def test_a_day_s_budget_crossed_by_one_decide_is_overspent_by_that_call_only(
    cli: str, wd: Paths, tmp_path: Path
) -> None:
    """The budget is checked before every decide: the decide that crossed `daily_usd` is
    charged what the server billed (claude and pi price it themselves, codex and llm at
    looop's built-in price), and the next beat is held without a request."""
    big = Turn(text=json.dumps(MOVE), input_tokens=10000, output_tokens=100)
    with FakeModel(script=[big]) as model:
        home = tmp_path / "home"
        first, _ = forced_pulse(wd, cli, model, home, limits="daily_usd = 0.001")
        assert first["outcome"] == "decided", first
        spend = ledger.load(open_wd(wd))
        assert spend.tokens == model.input_tokens + model.output_tokens == 10100
        assert spend.usd >= 0.001, spend.usd
        second, _ = forced_pulse(wd, cli, model, home, limits="daily_usd = 0.001")
    assert second["outcome"] == "held", second
    assert "daily USD budget spent" in second["reason"], second
    assert len(model.posts) == 1, len(model.posts)  # over by the one call, never more
    assert ledger.load(open_wd(wd)).tokens == 10100
