"""The fake model server itself: each wire format, tool calls in the CLI's own shape, errors."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.fakemodel import FakeModel, Turn


def post(model: FakeModel, path: str, body: dict[str, Any], timeout: float = 5) -> tuple[int, str]:
    req = urllib.request.Request(model.base + path, data=json.dumps(body).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sse_data(text: str) -> list[Any]:
    return [
        json.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def test_anthropic_stream_with_a_tool_call_in_the_cli_s_tool_shape() -> None:
    tools = [{"name": "Bash", "input_schema": {"properties": {"command": {"type": "string"}}}}]
    with FakeModel(script=[Turn(shell="true"), Turn(text="ok")]) as m:
        status, text = post(m, "/v1/messages", {"stream": True, "tools": tools, "messages": []})
    kinds = [e["type"] for e in sse_data(text)]
    assert status == 200
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    delta = next(e for e in sse_data(text) if e["type"] == "content_block_delta")
    assert json.loads(delta["delta"]["partial_json"]) == {"command": "true"}
    assert (m.input_tokens, m.output_tokens) == (120, 30)


def test_responses_stream_shell_as_an_argv_when_the_tool_wants_one() -> None:
    tools = [
        {
            "type": "function",
            "name": "shell",
            "parameters": {"properties": {"command": {"type": "array"}}},
        }
    ]
    with FakeModel(script=[Turn(shell="echo hi")]) as m:
        _, text = post(m, "/v1/responses", {"stream": True, "tools": tools, "input": []})
    events = sse_data(text)
    assert events[-1]["type"] == "response.completed"
    call = events[-1]["response"]["output"][0]
    assert json.loads(call["arguments"]) == {"command": ["bash", "-lc", "echo hi"]}


def test_chat_stream_ends_with_usage_only_when_asked() -> None:
    with FakeModel(script=[Turn(text="hi")]) as m:
        body = {"stream": True, "stream_options": {"include_usage": True}, "messages": []}
        _, with_usage = post(m, "/v1/chat/completions", body)
        _, without = post(m, "/v1/chat/completions", {"stream": True, "messages": []})
    assert sse_data(with_usage)[-1]["usage"]["prompt_tokens"] == 120
    assert "usage" not in sse_data(without)[-1]


def test_chat_whole_and_the_turn_follows_the_conversation() -> None:
    with FakeModel(script=[Turn(text="first"), Turn(text="second")]) as m:
        _, a = post(m, "/v1/chat/completions", {"messages": [{"role": "user"}]})
        called = {"role": "assistant", "tool_calls": [{"id": "c1"}]}
        _, b = post(m, "/v1/chat/completions", {"messages": [called]})
    assert json.loads(a)["choices"][0]["message"]["content"] == "first"
    assert json.loads(b)["choices"][0]["message"]["content"] == "second"


@pytest.mark.parametrize("status", [401, 429, 500])
def test_error_statuses_in_each_provider_s_body(status: int) -> None:
    with FakeModel(script=[Turn(status=status)]) as m:
        got, text = post(m, "/v1/messages", {"messages": []})
        got2, text2 = post(m, "/v1/chat/completions", {"messages": []})
    assert got == got2 == status
    assert json.loads(text)["type"] == "error"
    assert "message" in json.loads(text2)["error"]


def test_sequential_turns_follow_the_requests_not_the_conversation() -> None:
    with FakeModel(script=[Turn(text="first"), Turn(text="second")], sequential=True) as m:
        _, a = post(m, "/v1/chat/completions", {"messages": [{"role": "user"}]})
        _, b = post(m, "/v1/chat/completions", {"messages": [{"role": "user"}]})
    assert json.loads(a)["choices"][0]["message"]["content"] == "first"
    assert json.loads(b)["choices"][0]["message"]["content"] == "second"


def test_as_a_proxy_it_records_and_refuses_every_outside_host() -> None:
    with FakeModel() as m:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": m.base}))
        with pytest.raises(urllib.error.HTTPError) as err:
            opener.open("http://example.invalid/prices.json", timeout=5)
    assert err.value.code == 403
    assert m.proxied == ["http://example.invalid/prices.json"]


def test_a_failing_turn_carries_its_retry_after_and_then_the_script_answers() -> None:
    limited = Turn(status=429, retry_after="7")
    with FakeModel(script=[Turn(text="ok")], fail_first=[limited]) as m:
        req = urllib.request.Request(m.base + "/v1/chat/completions", data=b"{}", method="POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with pytest.raises(urllib.error.HTTPError) as err:
            opener.open(req, timeout=5)
        status, text = post(m, "/v1/chat/completions", {"messages": []})
    assert err.value.code == 429 and err.value.headers["retry-after"] == "7"
    assert status == 200 and json.loads(text)["choices"][0]["message"]["content"] == "ok"


def test_a_cut_reply_stops_halfway_and_a_hang_never_answers() -> None:
    cut = FakeModel(script=[Turn(text="a whole reply", cut=True)])
    with cut, pytest.raises((http.client.IncompleteRead, ConnectionError)):
        post(cut, "/v1/chat/completions", {"messages": []})
    assert (cut.input_tokens, cut.output_tokens, cut.cut_tokens) == (0, 0, 150)  # never sent
    m = FakeModel(script=[Turn(hang=True)])
    with m, pytest.raises((TimeoutError, urllib.error.URLError)):
        post(m, "/v1/chat/completions", {"messages": []}, timeout=1)
    assert len(m.posts) == 1
