"""The Anthropic Messages API (`POST /v1/messages`).

Structured output comes from a forced tool call: one tool whose input_schema
is the move union (wrapped in an object, as the API requires), and
`tool_choice` naming it, so the reply's `tool_use` block holds the move as
already-decoded JSON.

The prompt goes as content blocks (`base.prompt_blocks`): the policy (instructions
… goals) and the unchanged readings each end in a `cache_control` breakpoint
(two of the four the API allows), so the next decide reads them from the
cache at a tenth of the input price; the volatile rest follows unmarked.
Usage counts cached prompt tokens as prompt tokens and names them.
"""

from __future__ import annotations

import os
import time
from typing import Any

from looop_py.deciders import schema, transport
from looop_py.deciders.base import (
    DecideRequest,
    Decision,
    InvalidReply,
    PermanentError,
    Usage,
    prompt_blocks,
)
from looop_py.errors import ConfigError
from looop_py.workdir.config import DeciderConfig

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
API_VERSION = "2023-06-01"
MAX_BREAKPOINTS = 4  # the most cache_control markers one request may carry
EXTENDED_TTL_BETA = "extended-cache-ttl-2025-04-11"  # the 1-hour cache, as first released
TOOL_NAME = "propose_move"
TOOL_DESCRIPTION = (
    "Propose the one next move for looop to validate and execute. "
    "Put the move object under `move`; looop ignores any other reply."
)


class AnthropicDecider:
    name = "anthropic"
    reads_prompt = True

    def __init__(self, cfg: DeciderConfig, *, sleep: Any = time.sleep) -> None:
        if not cfg.model:
            raise ConfigError(
                "[decider] backend anthropic needs a model",
                'set model = "claude-sonnet-4-5" (or another Messages API model)',
            )
        self.cfg = cfg
        base = transport.check_url((cfg.base_url or DEFAULT_BASE_URL).rstrip("/"))
        self.base_url = base
        self.url = base + ("/messages" if base.endswith("/v1") else "/v1/messages")
        self.key_env = cfg.api_key_env or DEFAULT_KEY_ENV
        self.policy = transport.RetryPolicy(
            cfg.timeout_s, cfg.max_retries, cfg.backoff_s, cfg.max_wait_s
        )
        self._sleep = sleep

    def body(self, prompt: str) -> dict[str, Any]:
        return {
            "model": self.cfg.model,
            "max_tokens": self.cfg.max_tokens,
            "messages": [{"role": "user", "content": content_blocks(prompt, self.cfg.cache_ttl)}],
            "tools": [
                {
                    "name": TOOL_NAME,
                    "description": TOOL_DESCRIPTION,
                    "input_schema": schema.wrapped(),
                }
            ],
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
        }

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self.cfg.cache_ttl == "1h":
            headers["anthropic-beta"] = EXTENDED_TTL_BETA  # harmless where 1 h is generally there
        key = os.environ.get(self.key_env, "").strip()
        if key:
            headers["x-api-key"] = key
        elif not transport.is_loopback(self.base_url):
            raise PermanentError(
                f"${self.key_env} is not set; the anthropic backend needs an API key",
                f"export {self.key_env}=… in the environment looop runs in (cron too),"
                " or set api_key_env in [decider]",
            )
        return headers

    def decide(self, request: DecideRequest) -> Decision:
        headers = self.headers()
        return transport.decide(
            self.url,
            self.body(request.prompt),
            headers,
            backend=self.name,
            cfg=self.cfg,
            policy=self.policy,
            sleep=self._sleep,
            hint=f"check model and ${self.key_env}",
            read_reply=read_reply,
            read_usage=usage_of,
            stop_key="stop_reason",
            request_id_header="request-id",
        )


def content_blocks(prompt: str, ttl: str) -> list[dict[str, Any]]:
    """The prompt as text blocks; every block but the volatile last one is a cache breakpoint.

    Blocks are never empty (the API refuses an empty text block), and joined they
    are the prompt, byte for byte.
    """
    parts = [p for p in prompt_blocks(prompt) if p]
    marker: dict[str, Any] = {"type": "ephemeral"}
    if ttl != "5m":  # the API's default; "1h" must be asked for
        marker["ttl"] = ttl
    out: list[dict[str, Any]] = []
    for i, part in enumerate(parts):
        block: dict[str, Any] = {"type": "text", "text": part}
        if i < len(parts) - 1 and i < MAX_BREAKPOINTS:
            block["cache_control"] = dict(marker)
        out.append(block)
    return out


def read_reply(data: Any, max_tokens: int) -> tuple[Any, Usage | None, str | None]:
    """(move value, usage, stop_reason) from a Messages API reply."""
    if not isinstance(data, dict):
        raise InvalidReply("anthropic: the reply is not a JSON object")
    if data.get("type") == "error":
        err = data.get("error")
        why = err.get("message") if isinstance(err, dict) else err
        raise PermanentError(f"anthropic: error: {str(why)[:300]}")
    content = data.get("content")
    stop = data.get("stop_reason")
    if not isinstance(content, list):
        raise InvalidReply("anthropic: the reply has no content list")
    if stop == "refusal":
        raise InvalidReply("anthropic: the model refused to answer")
    if stop == "max_tokens":
        raise InvalidReply(
            f"anthropic: the reply was cut off at max_tokens={max_tokens}",
            "raise max_tokens in [decider]",
        )
    calls = [
        b
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == TOOL_NAME
    ]
    if not calls:
        text = " ".join(
            b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
        )
        said = f"; it said: {' '.join(text.split())[:200]!r}" if text.strip() else ""
        raise InvalidReply(f"anthropic: the model did not call {TOOL_NAME} (stop={stop}){said}")
    if len(calls) > 1:
        raise InvalidReply(f"anthropic: the model called {TOOL_NAME} {len(calls)} times; one move")
    value = calls[0].get("input")
    if not isinstance(value, dict):
        raise InvalidReply(f"anthropic: the {TOOL_NAME} input is not an object")
    return schema.unwrap(value), _usage(data.get("usage")), stop if isinstance(stop, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_of(data: Any) -> Usage | None:
    """The usage a reply reports, whether or not it holds a move (a bad reply is billed too)."""
    return _usage(data.get("usage")) if isinstance(data, dict) else None


def _usage(u: Any) -> Usage | None:
    """Every prompt token counts as input; those the cache served or took are named too
    (`input_tokens` is only the part after the last cache breakpoint)."""
    if not isinstance(u, dict) or not isinstance(u.get("input_tokens"), int):
        return None
    read = _int(u.get("cache_read_input_tokens"))
    written = _int(u.get("cache_creation_input_tokens"))
    tokens_in = _int(u.get("input_tokens")) + read + written
    return Usage(tokens_in, _int(u.get("output_tokens")), None, read, written)
