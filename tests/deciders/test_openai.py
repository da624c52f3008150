"""The openai backend against a real HTTP server on 127.0.0.1 speaking chat completions."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from looop_py.beat.pulse import beat
from looop_py.deciders.base import (
    DecideError,
    DecideRequest,
    InvalidReply,
    PermanentError,
    TemporaryError,
    TimedOut,
    request_in,
)
from looop_py.deciders.openai import OpenAIDecider
from looop_py.errors import ConfigError
from looop_py.moves import union
from looop_py.workdir.config import DeciderConfig
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd
from tests.fakeapi import FakeAPI, Reply, openai_completion

MOVE = {"action": "noop", "reason": "all quiet"}
USAGE = {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230}


def ok(move: Any = MOVE, usage: dict[str, int] | None = USAGE) -> Reply:
    return Reply(200, openai_completion(json.dumps({"move": move}), usage=usage))


def request(wd: Paths, prompt: str = "THE PROMPT") -> DecideRequest:
    return request_in(wd, 0.0, prompt=prompt)


def make(api: FakeAPI, sleeps: list[float] | None = None, **kw: Any) -> OpenAIDecider:
    settings: dict[str, Any] = {
        "backend": "openai",
        "model": "test-model",
        "base_url": api.base + "/v1",
        "api_key_env": "LOOOP_TEST_OPENAI_KEY",
        "timeout_s": 2.0,
        "backoff_s": 0.01,
        "max_wait_s": 5.0,
        **kw,
    }
    sleep = sleeps.append if sleeps is not None else time.sleep
    return OpenAIDecider(DeciderConfig(**settings), sleep=sleep)


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("LOOOP_TEST_OPENAI_KEY", "sk-test-123")
    return "sk-test-123"


def test_success_sends_the_documented_request_and_reads_move_and_usage(wd: Paths, key: str) -> None:
    with FakeAPI().reply(ok()) as api:
        decision = make(api, max_tokens=777).decide(request(wd))
    assert decision.move == MOVE
    assert union.parse(decision.move).name == "noop"
    assert decision.usage is not None
    assert (decision.usage.input_tokens, decision.usage.output_tokens) == (1200, 30)
    assert decision.usage.cost_usd is None  # no prices configured, none reported
    assert json.loads(decision.raw)["choices"][0]["message"]["content"]
    assert decision.meta["attempts"] == 1
    [seen] = api.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {key}"
    assert seen.headers["content-type"] == "application/json"
    body = seen.body
    assert body["model"] == "test-model"
    assert body["messages"] == [{"role": "user", "content": "THE PROMPT"}]
    assert body["max_tokens"] == 777  # a compatible server: max_tokens, not max_completion_tokens
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["type"] == "object" and schema["required"] == ["move"]
    assert len(schema["properties"]["move"]["anyOf"]) == len(union.ACTIONS)


def _strict_ok(node: Any, where: str = "$") -> None:
    """OpenAI strict mode: closed objects, every property required, no `const`."""
    if isinstance(node, dict):
        assert "const" not in node, where
        if node.get("type") == "object":
            assert node.get("additionalProperties") is False, where
            assert set(node["required"]) == set(node["properties"]), where
        for k, v in node.items():
            _strict_ok(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _strict_ok(v, f"{where}[{i}]")


def test_the_strict_schema_follows_the_strict_mode_rules_and_nulls_come_back_out(
    wd: Paths, key: str
) -> None:
    decider = make(FakeAPI())
    _strict_ok(decider.body("p")["response_format"]["json_schema"]["schema"])
    # What a strict-mode model returns: every field present, the unused ones null.
    strict_reply = {
        "move": {
            "action": "ask_human",
            "prompt": "Deploy now?",
            "options": None,
            "journal": None,
            "next_interval_s": None,
        }
    }
    with FakeAPI().reply(Reply(200, openai_completion(json.dumps(strict_reply)))) as api:
        move = make(api).decide(request(wd)).move
    assert move == {"action": "ask_human", "prompt": "Deploy now?"}
    assert union.parse(move).name == "ask_human"


def test_the_real_openai_host_gets_max_completion_tokens(key: str) -> None:
    cfg = DeciderConfig(backend="openai", model="gpt-x")
    body = OpenAIDecider(cfg).body("p")
    assert body["max_completion_tokens"] == cfg.max_tokens and "max_tokens" not in body


def test_429_then_success_honours_retry_after(wd: Paths, key: str) -> None:
    sleeps: list[float] = []
    limited = Reply(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "3"})
    with FakeAPI().reply(limited, ok()) as api:
        decision = make(api, sleeps).decide(request(wd))
    assert decision.move == MOVE
    assert sleeps == [3.0]  # the server's word, not our backoff
    assert len(api.requests) == 2 and decision.meta["attempts"] == 2


def test_500_then_success_backs_off_exponentially(wd: Paths, key: str) -> None:
    sleeps: list[float] = []
    down = Reply(500, {"error": {"message": "boom"}})
    with FakeAPI().reply(down, Reply(502, "bad gateway"), ok()) as api:
        decision = make(api, sleeps, backoff_s=0.5).decide(request(wd))
    assert decision.move == MOVE and len(api.requests) == 3
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 0.55 and 1.0 <= sleeps[1] <= 1.1


def test_a_real_retry_really_waits(wd: Paths, key: str) -> None:
    with FakeAPI().reply(Reply(503, "busy", {"Retry-After": "0.2"}), ok()) as api:
        started = time.monotonic()
        assert make(api).decide(request(wd)).move == MOVE
        assert time.monotonic() - started >= 0.2


def test_retries_are_bounded_by_attempts(wd: Paths, key: str) -> None:
    sleeps: list[float] = []
    busy = [Reply(503, {"error": {"message": "overloaded"}})] * 5
    with (
        FakeAPI().reply(*busy) as api,
        pytest.raises(TemporaryError, match=r"after 3 attempt\(s\).*overloaded"),
    ):
        make(api, sleeps, max_retries=2).decide(request(wd))
    assert len(api.requests) == 3 and len(sleeps) == 2


def test_retries_are_bounded_by_total_wait(wd: Paths, key: str) -> None:
    sleeps: list[float] = []
    slow = Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "120"})
    with FakeAPI().reply(slow) as api, pytest.raises(TemporaryError, match="max_wait_s=5") as info:
        make(api, sleeps).decide(request(wd))
    assert sleeps == [] and len(api.requests) == 1
    assert info.value.delay == 120  # what the server asked for, for whoever tries next


def test_a_dropped_connection_is_retried(wd: Paths, key: str) -> None:
    with FakeAPI().reply(Reply(drop=True), ok()) as api:
        assert make(api).decide(request(wd)).move == MOVE
    assert len(api.requests) == 2


def test_a_client_error_is_not_retried_and_says_what_the_server_said(wd: Paths, key: str) -> None:
    denied = Reply(401, {"error": {"message": "Incorrect API key provided"}})
    with (
        FakeAPI().reply(denied, ok()) as api,
        pytest.raises(PermanentError, match="HTTP 401: Incorrect API key provided") as info,
    ):
        make(api).decide(request(wd))
    assert len(api.requests) == 1
    assert key not in str(info.value)


@pytest.mark.parametrize(
    ("reply", "kind", "delay"),
    [
        (Reply(401, {"error": {"message": "Incorrect API key"}}), PermanentError, None),
        (Reply(403, {"error": {"message": "not allowed"}}), PermanentError, None),
        (Reply(400, {"error": {"message": "bad request"}}), PermanentError, None),
        (Reply(404, {"error": {"message": "no such model"}}), PermanentError, None),
        (Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"}), TemporaryError, 7),
        (
            Reply(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "1500"}),
            TemporaryError,
            1.5,
        ),
        (Reply(408, {"error": {"message": "request timeout"}}), TemporaryError, None),
        (Reply(500, {"error": {"message": "boom"}}), TemporaryError, None),
        (Reply(503, "busy", {"Retry-After": "2"}), TemporaryError, 2),
        (Reply(drop=True), TemporaryError, None),
        (Reply(200, openai_completion("I think we should wait.")), InvalidReply, None),
        (Reply(200, b"<html>oops</html>"), InvalidReply, None),
    ],
)
def test_a_failure_is_typed_where_the_transport_sees_it(
    wd: Paths, key: str, reply: Reply, kind: type[DecideError], delay: float | None
) -> None:
    """The HTTP status (or the dropped connection, or the reply) says whether a retry may
    help, and how long the server asked to wait; the retry loop only reads the type."""
    sleeps: list[float] = []
    with FakeAPI().reply(reply) as api, pytest.raises(DecideError) as info:
        make(api, sleeps, max_retries=0).decide(request(wd))
    assert type(info.value) is kind, info.value
    assert getattr(info.value, "delay", None) == delay
    assert len(api.requests) == 1 and sleeps == []


def test_only_temporary_failures_are_retried(wd: Paths, key: str) -> None:
    sleeps: list[float] = []
    prose = Reply(200, openai_completion("I think we should wait."))
    with FakeAPI().reply(prose, ok()) as api, pytest.raises(InvalidReply, match="no JSON object"):
        make(api, sleeps).decide(request(wd))
    assert len(api.requests) == 1 and sleeps == []  # a billed reply is not asked for again
    busy = Reply(503, {"error": {"message": "overloaded"}}, {"Retry-After": "4"})
    with FakeAPI().reply(busy, busy) as api, pytest.raises(TemporaryError) as info:
        make(api, sleeps, max_retries=1).decide(request(wd))
    assert info.value.delay == 4.0 and sleeps == [4.0] and len(api.requests) == 2


def test_timeout_when_the_server_is_slower_than_the_client(wd: Paths, key: str) -> None:
    with FakeAPI().reply(Reply(200, openai_completion("{}"), delay_s=1.5)) as api:
        started = time.monotonic()
        with pytest.raises(TimedOut, match=r"no answer .* within 0.3s") as info:
            make(api, timeout_s=0.3).decide(request(wd))
        assert isinstance(info.value, TemporaryError)  # a later beat may get an answer
        assert time.monotonic() - started < 1.2
    assert len(api.requests) == 1  # a timeout is not retried


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(200, b"<html>oops</html>"), "not JSON"),
        (Reply(200, {"object": "chat.completion"}), "no choices"),
        (Reply(200, {"error": {"message": "model not loaded"}}), "no choices: model not loaded"),
        (Reply(200, openai_completion("I think we should wait.")), "no JSON object"),
        (Reply(200, openai_completion('{"move": {"action": "noop"}} {"x": 1}')), "more than one"),
        (Reply(200, openai_completion("[1, 2]")), "not an object"),
        (Reply(200, openai_completion(None)), "no text"),
        (Reply(200, openai_completion('{"move": {"act', finish_reason="length")), "max_tokens"),
        (
            Reply(200, openai_completion(None, refusal="I can't help with that.")),
            "refused: I can't help with that",
        ),
    ],
)
def test_malformed_bodies_and_refusals_are_decide_errors(
    wd: Paths, key: str, reply: Reply, reason: str
) -> None:
    with FakeAPI().reply(reply) as api, pytest.raises(PermanentError, match=reason) as info:
        make(api).decide(request(wd))
    assert info.value.raw  # the archive still gets what the server sent
    assert len(api.requests) == 1


def test_missing_key_is_a_clear_error_before_any_request(
    wd: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOOOP_TEST_OPENAI_KEY", raising=False)
    cfg = DeciderConfig(
        backend="openai",
        model="m",
        base_url="https://llm.example.invalid/v1",
        api_key_env="LOOOP_TEST_OPENAI_KEY",
    )
    with pytest.raises(PermanentError, match=r"\$LOOOP_TEST_OPENAI_KEY is not set") as info:
        OpenAIDecider(cfg).decide(request(wd))
    assert "export LOOOP_TEST_OPENAI_KEY" in (info.value.hint or "")


def test_a_local_server_needs_no_key(wd: Paths, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOOOP_TEST_OPENAI_KEY", raising=False)
    with FakeAPI().reply(ok()) as api:
        assert make(api).decide(request(wd)).move == MOVE
    assert "authorization" not in api.requests[0].headers


def test_cost_from_configured_prices_or_from_the_reply(wd: Paths, key: str) -> None:
    with FakeAPI().reply(ok()) as api:
        usage = make(api, usd_per_mtok_in=2.0, usd_per_mtok_out=8.0).decide(request(wd)).usage
    assert usage is not None and usage.cost_usd == pytest.approx(1200 * 2e-6 + 30 * 8e-6)
    reported = {**USAGE, "cost": 0.0042}
    with FakeAPI().reply(ok(usage=reported)) as api:
        usage = make(api, usd_per_mtok_in=2.0).decide(request(wd)).usage
    assert usage is not None and usage.cost_usd == 0.0042  # the reported cost wins
    with FakeAPI().reply(ok(usage=None)) as api:
        assert make(api).decide(request(wd)).usage is None  # unmetered stays unmetered


def test_structured_off_sends_no_schema_and_accepts_a_bare_move(wd: Paths, key: str) -> None:
    reply = Reply(200, openai_completion("```json\n" + json.dumps(MOVE) + "\n```"))
    with FakeAPI().reply(reply) as api:
        assert make(api, structured=False).decide(request(wd)).move == MOVE
    assert "response_format" not in api.requests[0].body


def test_config_errors(key: str) -> None:
    with pytest.raises(ConfigError, match="needs a model"):
        OpenAIDecider(DeciderConfig(backend="openai"))
    with pytest.raises(ConfigError, match="not an http"):
        OpenAIDecider(DeciderConfig(backend="openai", model="m", base_url="file:///etc/passwd"))


def test_unreachable_server_fails_fast(wd: Paths, key: str) -> None:
    api = FakeAPI()  # bound but never serving, then closed: nothing listens on its port
    base = api.base
    api.server.server_close()
    cfg = DeciderConfig(backend="openai", model="m", base_url=base, api_key_env="X", timeout_s=2)
    started = time.monotonic()
    with pytest.raises(PermanentError, match="cannot reach"):
        OpenAIDecider(cfg).decide(request(wd))
    assert time.monotonic() - started < 1.5


def test_a_pulse_decides_through_the_openai_backend(wd: Paths, key: str) -> None:
    with FakeAPI().reply(ok()) as api:
        wd.config.write_text(
            "[decider]\n"
            'backend = "openai"\n'
            'model = "test-model"\n'
            f'base_url = "{api.base}/v1"\n'
            'api_key_env = "LOOOP_TEST_OPENAI_KEY"\n'
            "timeout_s = 2\n"
        )
        result = beat(open_wd(wd))
    assert result.outcome == "decided", result.reason
    assert result.move == MOVE
    assert len(api.requests) == 1
