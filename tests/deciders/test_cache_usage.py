"""Cached prompt tokens, per backend: read into usage as the provider or CLI reports them,
and priced at `usd_per_mtok_cached_in` / `usd_per_mtok_cache_write` when those are set."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from looop_py.deciders import pricing
from looop_py.deciders.base import Usage, request_in
from looop_py.deciders.command import CommandDecider
from looop_py.deciders.openai import OpenAIDecider
from looop_py.workdir.config import DeciderConfig
from looop_py.workdir.paths import Paths
from looop_py.workers import streams
from tests.fakeapi import FakeAPI, Reply, openai_completion

MOVE = {"action": "noop", "reason": "cached"}
PRICES = {
    "usd_per_mtok_in": 2.0,
    "usd_per_mtok_out": 8.0,
    "usd_per_mtok_cached_in": 0.5,
    "usd_per_mtok_cache_write": 2.5,
}


def usd(plain: int, read: int, written: int, out: int) -> float:
    return (plain * 2.0 + read * 0.5 + written * 2.5 + out * 8.0) / 1e6


def openai(wd: Paths, body: dict[str, Any]) -> Usage | None:
    cfg = DeciderConfig(backend="openai", model="m", timeout_s=2.0, **PRICES)
    with FakeAPI().reply(Reply(200, body)) as api:
        cfg = dataclasses.replace(cfg, base_url=api.base)
        return OpenAIDecider(cfg).decide(request_in(wd, 0.0, prompt="P")).usage


def test_openai_chat_cached_tokens(wd: Paths) -> None:
    body = openai_completion(json.dumps(MOVE))
    body["usage"] = {
        "prompt_tokens": 3000,
        "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 2048},
    }
    usage = openai(wd, body)
    assert usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        3000,
        2048,
        0,
    )
    assert usage.cost_usd == pytest.approx(usd(952, 2048, 0, 40))


def test_openai_responses_shaped_usage_cached_tokens(wd: Paths) -> None:
    body = openai_completion(json.dumps(MOVE))
    body["usage"] = {
        "input_tokens": 5000,
        "input_tokens_details": {"cached_tokens": 4096},
        "output_tokens": 12,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 5012,
    }
    usage = openai(wd, body)
    assert usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (5000, 4096, 12)
    assert usage.cost_usd == pytest.approx(usd(904, 4096, 0, 12))


def test_a_reported_cached_count_larger_than_the_prompt_is_clipped(wd: Paths) -> None:
    body = openai_completion(json.dumps(MOVE))
    body["usage"] = {
        "prompt_tokens": 10,
        "completion_tokens": 1,
        "prompt_tokens_details": {"cached_tokens": 99},
    }
    usage = openai(wd, body)
    assert usage is not None and usage.cache_read_tokens == 10


def _cli(wd: Paths, tmp_path: Path, lines: list[dict[str, Any]]) -> Usage | None:
    out = tmp_path / "out.jsonl"
    out.write_text("".join(json.dumps(e) + "\n" for e in lines))
    cfg = DeciderConfig(backend="command", command=f"cat {out}", timeout_s=10.0, **PRICES)
    return CommandDecider(cfg).decide(request_in(wd, 0.0, prompt="P")).usage


def test_codex_envelope_cached_input_priced(wd: Paths, tmp_path: Path) -> None:
    usage = _cli(
        wd,
        tmp_path,
        [
            {"type": "thread.started", "thread_id": "t"},
            {"type": "item.completed", "item": {"type": "agent_message", "text": json.dumps(MOVE)}},
            {
                "type": "turn.completed",
                "usage": {
                    "input_tokens": 24763,
                    "cached_input_tokens": 24448,
                    "output_tokens": 122,
                },
            },
        ],
    )
    assert usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens) == (24763, 24448)
    assert usage.cost_usd == pytest.approx(usd(315, 24448, 0, 122))


def test_claude_envelope_keeps_its_own_cost_and_names_the_cache(wd: Paths, tmp_path: Path) -> None:
    text = json.dumps(MOVE)
    usage = _cli(
        wd,
        tmp_path,
        [
            {"type": "system", "subtype": "init", "session_id": "s"},
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": text,
                "total_cost_usd": 0.0099,
                "usage": {
                    "input_tokens": 4,
                    "cache_creation_input_tokens": 1200,
                    "cache_read_input_tokens": 18000,
                    "output_tokens": 50,
                },
            },
        ],
    )
    assert usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        19204,
        18000,
        1200,
    )
    assert usage.cost_usd == 0.0099  # the CLI's own figure wins over configured prices


def test_pi_envelope_cache_read_and_write(wd: Paths, tmp_path: Path) -> None:
    usage = _cli(
        wd,
        tmp_path,
        [
            {"type": "session", "id": "p"},
            {
                "type": "message_end",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": json.dumps(MOVE)}],
                    "usage": {"input": 300, "output": 20, "cacheRead": 5000, "cacheWrite": 700},
                    "stopReason": "stop",
                },
            },
        ],
    )
    assert usage is not None
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        6000,
        5000,
        700,
    )
    assert usage.cost_usd == pytest.approx(usd(300, 5000, 700, 20))


def test_unset_cache_prices_cost_as_input() -> None:
    cfg = DeciderConfig(usd_per_mtok_in=3.0, usd_per_mtok_out=15.0)
    usage = pricing.priced(Usage(1000, 10, None, 800, 100), cfg)
    assert usage is not None and usage.cost_usd == pytest.approx((1000 * 3 + 10 * 15) / 1e6)
    assert pricing.priced(Usage(1000, 10, None, 800), DeciderConfig()) == Usage(1000, 10, None, 800)


def test_a_claude_worker_stream_names_its_cache(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    result = {
        "type": "result",
        "subtype": "success",
        "result": "done",
        "total_cost_usd": 0.5,
        "usage": {
            "input_tokens": 7,
            "cache_read_input_tokens": 9000,
            "cache_creation_input_tokens": 300,
            "output_tokens": 70,
        },
    }
    log.write_text(json.dumps(result) + "\n")
    usage = streams.read("claude", log).usage
    assert usage is not None
    assert (usage["input_tokens"], usage["cache_read_tokens"], usage["cache_write_tokens"]) == (
        9307,
        9000,
        300,
    )
    assert usage["cost_usd"] == 0.5


def test_through_the_pulse_anthropic_caches_the_stable_part_and_status_shows_hits(
    wd: Paths,
) -> None:
    from tests.conftest import invoke_looop, write_sensor
    from tests.fakeapi import anthropic_message

    def reply(read: int, written: int) -> Reply:
        call = {"type": "tool_use", "id": "t", "name": "propose_move", "input": {"move": MOVE}}
        usage = {
            "input_tokens": 100,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": 20,
        }
        return Reply(200, anthropic_message([call], usage=usage))

    write_sensor(wd, "ci", 'echo "{\\"signal\\": \\"green\\", \\"detail\\": {\\"at\\": $RANDOM}}"')
    with FakeAPI().reply(reply(0, 4000), reply(4000, 0), reply(4000, 0)) as api:
        wd.config.write_text(
            f'[decider]\nbackend = "anthropic"\nmodel = "claude-test"\nbase_url = "{api.base}"\n'
            "usd_per_mtok_in = 3.0\nusd_per_mtok_out = 15.0\nusd_per_mtok_cached_in = 0.3\n"
            "usd_per_mtok_cache_write = 6.0\n"
        )
        for _ in range(3):  # the first decide sees every reading appear
            r = invoke_looop("-C", str(wd.root), "pulse", "--force", "--json")
            assert json.loads(r.stdout)["outcome"] == "decided", r.stdout + r.stderr
    _, first, second = (seen.body["messages"][0]["content"] for seen in api.requests)
    for content in (first, second):
        assert [b.get("cache_control") for b in content] == [
            {"type": "ephemeral", "ttl": "1h"},
            {"type": "ephemeral", "ttl": "1h"},
            None,
        ]
        assert content[1]["text"].startswith("=== SENSOR READINGS")
    # The ci sensor's detail moved, but the stable part is byte-identical.
    assert first[0]["text"] + first[1]["text"] == second[0]["text"] + second[1]["text"]
    status = json.loads(invoke_looop("-C", str(wd.root), "status", "--json").stdout)["limits"]
    assert status["cache_hit_ratio"] == pytest.approx(8000 / 12300, abs=1e-4)
    decider = status["by_source"]["decider"]
    assert decider["tokens"] == 3 * 4120
    want = (100 * 3 + 4000 * 6 + 20 * 15 + 2 * (100 * 3 + 4000 * 0.3 + 20 * 15)) / 1e6
    assert decider["usd"] == pytest.approx(want)
    text = invoke_looop("-C", str(wd.root), "status").stdout
    assert "cache hits  65% of today's prompt tokens" in text and "decider 12360 tokens" in text
