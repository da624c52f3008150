"""The anthropic backend against a real HTTP server on 127.0.0.1 speaking the Messages API."""

from __future__ import annotations

import time
from typing import Any

import pytest

from looop_py.deciders.anthropic import API_VERSION, TOOL_NAME, AnthropicDecider
from looop_py.deciders.base import (
    DecideError,
    DecideRequest,
    PermanentError,
    TemporaryError,
    request_in,
)
from looop_py.errors import ConfigError
from looop_py.moves import union
from looop_py.workdir.config import DeciderConfig
from looop_py.workdir.paths import Paths
from tests.fakeapi import FakeAPI, Reply, anthropic_message

MOVE = {"action": "write_goal", "id": "ship-it", "body": "# Ship it\n"}
USAGE = {
    "input_tokens": 50,
    "cache_creation_input_tokens": 1000,
    "cache_read_input_tokens": 4000,
    "output_tokens": 80,
}


def tool_use(value: Any, name: str = TOOL_NAME) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_1", "name": name, "input": value}


def ok(move: Any = MOVE) -> Reply:
    return Reply(200, anthropic_message([tool_use({"move": move})], usage=USAGE))


def request(wd: Paths, prompt: str = "THE PROMPT") -> DecideRequest:
    return request_in(wd, 0.0, prompt=prompt)


def make(api: FakeAPI, sleeps: list[float] | None = None, **kw: Any) -> AnthropicDecider:
    settings: dict[str, Any] = {
        "backend": "anthropic",
        "model": "claude-test",
        "base_url": api.base,
        "api_key_env": "LOOOP_TEST_ANTHROPIC_KEY",
        "timeout_s": 2.0,
        "backoff_s": 0.01,
        "max_wait_s": 5.0,
        **kw,
    }
    sleep = sleeps.append if sleeps is not None else time.sleep
    return AnthropicDecider(DeciderConfig(**settings), sleep=sleep)


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("LOOOP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    return "sk-ant-test"


def test_success_forces_the_tool_and_reads_its_input(wd: Paths, key: str) -> None:
    with FakeAPI().reply(ok()) as api:
        decision = make(api, max_tokens=1234).decide(request(wd))
    assert decision.move == MOVE
    assert union.parse(decision.move).name == "write_goal"
    assert decision.usage is not None
    assert decision.usage.input_tokens == 50 + 1000 + 4000  # cached prompt tokens count
    assert decision.usage.output_tokens == 80
    assert decision.meta["stop_reason"] == "tool_use"
    [seen] = api.requests
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == key
    assert seen.headers["anthropic-version"] == API_VERSION
    assert "authorization" not in seen.headers
    body = seen.body
    assert body["model"] == "claude-test" and body["max_tokens"] == 1234
    # A prompt with no stable sections is one unmarked block.
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "THE PROMPT"}]}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    [tool] = body["tools"]
    assert tool["name"] == TOOL_NAME
    schema = tool["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["move"]
    assert len(schema["properties"]["move"]["anyOf"]) == len(union.ACTIONS)


def test_base_url_with_v1_is_not_doubled(key: str) -> None:
    cfg = DeciderConfig(backend="anthropic", model="m", base_url="http://127.0.0.1:9/v1/")
    assert AnthropicDecider(cfg).url == "http://127.0.0.1:9/v1/messages"
    assert AnthropicDecider(DeciderConfig(backend="anthropic", model="m")).url == (
        "https://api.anthropic.com/v1/messages"
    )


def test_429_then_success(wd: Paths, key: str) -> None:
    sleeps: list[float] = []
    limited = Reply(
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        {"retry-after": "2"},
    )
    with FakeAPI().reply(limited, ok()) as api:
        decision = make(api, sleeps).decide(request(wd))
    assert decision.move == MOVE and sleeps == [2.0] and len(api.requests) == 2


def test_overloaded_529_and_500_then_success(wd: Paths, key: str) -> None:
    sleeps: list[float] = []
    overloaded = Reply(529, {"type": "error", "error": {"type": "overloaded_error"}})
    with FakeAPI().reply(overloaded, Reply(500, "{}"), ok()) as api:
        decision = make(api, sleeps, backoff_s=0.25).decide(request(wd))
    assert decision.move == MOVE and len(api.requests) == 3
    assert 0.25 <= sleeps[0] <= 0.3 and 0.5 <= sleeps[1] <= 0.55


@pytest.mark.parametrize(
    ("reply", "kind", "delay"),
    [
        (
            Reply(401, {"type": "error", "error": {"type": "authentication_error"}}),
            PermanentError,
            None,
        ),
        (
            Reply(
                429,
                {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
                {"retry-after": "12"},
            ),
            TemporaryError,
            12,
        ),
        (
            Reply(529, {"type": "error", "error": {"type": "overloaded_error"}}),
            TemporaryError,
            None,
        ),
    ],
)
def test_the_status_says_whether_a_retry_may_help(
    wd: Paths, key: str, reply: Reply, kind: type[DecideError], delay: float | None
) -> None:
    with FakeAPI().reply(reply) as api, pytest.raises(kind) as info:
        make(api, [], max_retries=0).decide(request(wd))
    assert getattr(info.value, "delay", None) == delay and len(api.requests) == 1


def test_timeout_when_the_server_is_slower_than_the_client(wd: Paths, key: str) -> None:
    with FakeAPI().reply(Reply(200, anthropic_message([]), delay_s=1.5)) as api:
        started = time.monotonic()
        with pytest.raises(DecideError, match=r"within 0\.3s"):
            make(api, timeout_s=0.3).decide(request(wd))
        assert time.monotonic() - started < 1.2
    assert len(api.requests) == 1


def test_a_bad_request_says_what_the_api_said(wd: Paths, key: str) -> None:
    bad = Reply(
        400,
        {"type": "error", "error": {"type": "invalid_request_error", "message": "bad model"}},
    )
    with FakeAPI().reply(bad) as api, pytest.raises(DecideError, match="HTTP 400: bad model"):
        make(api).decide(request(wd))


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(200, b"{not json"), "not JSON"),
        (Reply(200, {"type": "message", "content": "text"}), "no content list"),
        (
            Reply(
                200,
                anthropic_message([{"type": "text", "text": "I'd rather not."}], stop="end_turn"),
            ),
            r"did not call propose_move \(stop=end_turn\); it said: \"I'd rather not.\"",
        ),
        (Reply(200, anthropic_message([], stop="refusal")), "refused"),
        (Reply(200, anthropic_message([tool_use({"move": {}})], stop="max_tokens")), "max_tokens"),
        (
            Reply(200, anthropic_message([tool_use({"move": {}}, name="other_tool")])),
            "did not call",
        ),
        (
            Reply(200, anthropic_message([tool_use({"move": MOVE}), tool_use({"move": MOVE})])),
            "2 times",
        ),
        (Reply(200, anthropic_message([tool_use("a string")])), "not an object"),
        (Reply(200, {"type": "error", "error": {"message": "overloaded"}}), "overloaded"),
    ],
)
def test_malformed_bodies_refusals_and_missing_tool_calls_are_decide_errors(
    wd: Paths, key: str, reply: Reply, reason: str
) -> None:
    with FakeAPI().reply(reply) as api, pytest.raises(PermanentError, match=reason):
        make(api).decide(request(wd))
    assert len(api.requests) == 1


def test_a_tool_input_without_the_wrapper_is_passed_through(wd: Paths, key: str) -> None:
    reply = Reply(200, anthropic_message([tool_use(MOVE)]))
    with FakeAPI().reply(reply) as api:
        assert make(api).decide(request(wd)).move == MOVE


def test_prices_give_a_cost(wd: Paths, key: str) -> None:
    with FakeAPI().reply(ok()) as api:
        usage = make(api, usd_per_mtok_in=3.0, usd_per_mtok_out=15.0).decide(request(wd)).usage
    assert usage is not None
    assert usage.cost_usd == pytest.approx(5050 * 3e-6 + 80 * 15e-6)


def _real_prompt() -> str:
    from looop_py.deciders import prompt

    return prompt.build(
        prompt.PromptInput(
            now=1_700_000_000.0,
            playbook="Be careful.",
            goals=[("a", "# A\n")],
            snapshots=[("sensor-ci", {"signal": "green", "detail": {"at": 1}})],
            changed=[{"item": "goal:a", "old": "x", "new": "y"}],
        )
    )


@pytest.mark.parametrize("ttl", ["1h", "5m"])
def test_the_stable_part_carries_cache_markers(wd: Paths, key: str, ttl: str) -> None:
    text = _real_prompt()
    with FakeAPI().reply(ok()) as api:
        make(api, cache_ttl=ttl).decide(request(wd, text))
    [seen] = api.requests
    [message] = seen.body["messages"]
    policy, readings, rest = message["content"]
    assert policy["text"] + readings["text"] + rest["text"] == text  # byte for byte
    assert policy["text"].startswith("=== INSTRUCTIONS") and "=== GOALS" in policy["text"]
    assert readings["text"].startswith("=== SENSOR READINGS")
    assert rest["text"].startswith("=== WHAT CHANGED") and "cache_control" not in rest
    marker = {"type": "ephemeral", **({"ttl": "1h"} if ttl == "1h" else {})}
    assert policy["cache_control"] == marker and readings["cache_control"] == marker
    beta = seen.headers.get("anthropic-beta")
    assert beta == ("extended-cache-ttl-2025-04-11" if ttl == "1h" else None)


def test_cached_tokens_are_read_into_usage_and_priced(wd: Paths, key: str) -> None:
    prices = {
        "usd_per_mtok_in": 3.0,
        "usd_per_mtok_out": 15.0,
        "usd_per_mtok_cached_in": 0.3,
        "usd_per_mtok_cache_write": 3.75,
    }
    with FakeAPI().reply(ok()) as api:
        usage = make(api, **prices).decide(request(wd)).usage
    assert usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        5050,
        4000,
        1000,
    )
    assert usage.cost_usd == pytest.approx((50 * 3 + 4000 * 0.3 + 1000 * 3.75 + 80 * 15) / 1e6)


def test_missing_key_and_missing_model(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOOP_TEST_ANTHROPIC_KEY", raising=False)
    cfg = DeciderConfig(backend="anthropic", model="m", api_key_env="LOOOP_TEST_ANTHROPIC_KEY")
    with pytest.raises(PermanentError, match=r"\$LOOOP_TEST_ANTHROPIC_KEY is not set"):
        AnthropicDecider(cfg).decide(request(wd))
    with pytest.raises(ConfigError, match="needs a model"):
        AnthropicDecider(DeciderConfig(backend="anthropic"))
