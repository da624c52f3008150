"""OpenAI-compatible chat completions: OpenAI, Ollama, llama.cpp server, vLLM, LiteLLM …

One POST to `<base_url>/chat/completions` with the prompt as the user
message and, unless `structured = false`, the move union as a strict JSON
schema (`response_format: json_schema`). Usage comes from the reply's
`usage`; cost from the reply when a proxy reports one, else from the
configured per-million-token prices, else it stays unknown.
"""

from __future__ import annotations

import os
import time
import urllib.parse
from typing import Any

from looop_py.deciders import parse, schema, transport
from looop_py.deciders.base import (
    DecideRequest,
    Decision,
    InvalidReply,
    PermanentError,
    Usage,
)
from looop_py.errors import ConfigError
from looop_py.workdir.config import DeciderConfig

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
SCHEMA_NAME = "looop_move"


class OpenAIDecider:
    name = "openai"
    reads_prompt = True

    def __init__(self, cfg: DeciderConfig, *, sleep: Any = time.sleep) -> None:
        if not cfg.model:
            raise ConfigError(
                "[decider] backend openai needs a model",
                'set model = "gpt-4.1-mini" (or the name your server gives its model)',
            )
        self.cfg = cfg
        self.base_url = transport.check_url((cfg.base_url or DEFAULT_BASE_URL).rstrip("/"))
        self.url = self.base_url + "/chat/completions"
        self.key_env = cfg.api_key_env or DEFAULT_KEY_ENV
        self.policy = transport.RetryPolicy(
            cfg.timeout_s, cfg.max_retries, cfg.backoff_s, cfg.max_wait_s
        )
        self._sleep = sleep

    def body(self, prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": [{"role": "user", "content": prompt}],
        }
        # OpenAI's own newer models refuse `max_tokens`; compatible servers know only it.
        host = urllib.parse.urlsplit(self.base_url).hostname or ""
        limit_key = "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
        body[limit_key] = self.cfg.max_tokens
        if self.cfg.structured:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": SCHEMA_NAME,
                    "strict": True,
                    "schema": schema.wrapped(strict=True),
                },
            }
        return body

    def headers(self) -> dict[str, str]:
        key = os.environ.get(self.key_env, "").strip()
        if key:
            return {"Authorization": f"Bearer {key}"}
        if transport.is_loopback(self.base_url):
            return {}  # Ollama, llama.cpp and friends on this machine need no key
        raise PermanentError(
            f"${self.key_env} is not set; the openai backend needs an API key",
            f"export {self.key_env}=… in the environment looop runs in (cron too),"
            " or set api_key_env in [decider]",
        )

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
            hint=f"check model and ${self.key_env}" if headers else "check model and base_url",
            read_reply=read_reply,
            read_usage=usage_of,
            stop_key="finish_reason",
            request_id_header="x-request-id",
        )


def read_reply(data: Any, max_tokens: int) -> tuple[Any, Usage | None, str | None]:
    """(move value, usage, finish_reason) from a chat.completion object."""
    if not isinstance(data, dict):
        raise InvalidReply("openai: the reply is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        err = data.get("error")  # some servers answer 200 with an error object
        why = err.get("message") if isinstance(err, dict) else err
        raise (PermanentError if why else InvalidReply)(
            "openai: the reply has no choices" + (f": {str(why)[:300]}" if why else "")
        )
    message = choices[0].get("message")
    finish = choices[0].get("finish_reason")
    if not isinstance(message, dict):
        raise InvalidReply("openai: the first choice has no message")
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        raise InvalidReply(f"openai: the model refused: {refusal.strip()[:300]}")
    if finish == "length":
        raise InvalidReply(
            f"openai: the reply was cut off at max_tokens={max_tokens}",
            "raise max_tokens in [decider]",
        )
    if finish == "content_filter":
        raise InvalidReply("openai: the reply was withheld by the provider's content filter")
    content = message.get("content")
    if isinstance(content, list):  # some servers answer with content parts
        content = "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    if not isinstance(content, str) or not content.strip():
        raise InvalidReply(f"openai: the reply has no text (finish_reason={finish})")
    move = schema.unwrap(parse.parse_object(content))
    return move, _usage(data.get("usage")), finish if isinstance(finish, str) else None


def usage_of(data: Any) -> Usage | None:
    """The usage a reply reports, whether or not it holds a move (a bad reply is billed too)."""
    return _usage(data.get("usage")) if isinstance(data, dict) else None


def _usage(u: Any) -> Usage | None:
    """Chat completions usage (`prompt_tokens`, `prompt_tokens_details.cached_tokens`), or
    the Responses API's shape some servers answer with (`input_tokens`,
    `input_tokens_details.cached_tokens`). Cached tokens are part of the prompt tokens."""
    if not isinstance(u, dict):
        return None
    chat = "prompt_tokens" in u
    tokens_in = _count(u.get("prompt_tokens" if chat else "input_tokens"))
    tokens_out = _count(u.get("completion_tokens" if chat else "output_tokens"))
    if tokens_in is None or tokens_out is None:
        return None
    details = u.get("prompt_tokens_details" if chat else "input_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    cost = u.get("cost")  # proxies such as OpenRouter report it
    if not isinstance(cost, int | float) or isinstance(cost, bool) or cost < 0:
        cost = None
    return Usage(
        tokens_in,
        tokens_out,
        None if cost is None else float(cost),
        cache_read_tokens=min(cached or 0, tokens_in),
    )


def _count(value: Any) -> int | None:
    """A token count (negative reads as 0); None when it is not an integer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return max(0, value)
    return None
