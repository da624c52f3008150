"""A fake model server on 127.0.0.1 that speaks the wire formats real agent CLIs use.

- Anthropic Messages, `POST …/v1/messages`, SSE when `stream` is true (claude); `HEAD /`
  and any GET answer 200 (claude probes the base URL);
- OpenAI Responses, `POST …/responses`, SSE (codex);
- OpenAI chat completions, `POST …/chat/completions`, streaming with
  `stream_options.include_usage` (pi, aider) and non-streaming (llm).

The script is a list of `Turn`s. The reply to a request is chosen by how many tool calls
its conversation already holds, so a CLI's own retries and side requests see the same
answer for the same point in the conversation; with `sequential` (aider, which sends no
tools: it edits files from the reply's text) the Nth request gets the Nth turn. A turn
is a text, a shell tool call (found by the name the CLI gave its shell tool, with that
tool's argument shape), or an error status. Every reply's usage is added to `usage`, so
a test compares what the CLI reported with what the server said.

Pointed to as an HTTP(S) proxy (`HTTPS_PROXY`), it records every attempt to reach another
host in `proxied` and refuses it: a test of "no network" reads that list.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SHELL_TOOLS = ("Bash", "bash", "shell", "shell_command", "exec_command", "local_shell")
ERROR_TEXT = {
    401: ("authentication_error", "invalid x-api-key (fake model server)"),
    429: ("rate_limit_error", "rate limited by the fake model server"),
    500: ("api_error", "internal error in the fake model server"),
    529: ("overloaded_error", "overloaded (fake model server)"),
}


@dataclass
class Turn:
    text: str = ""  # the model's text (a move as JSON, or a final message)
    shell: str = ""  # a shell command the model asks to run through the CLI's shell tool
    status: int = 200  # an error status answers with the provider's error body
    retry_after: str = "0"  # the Retry-After header sent with an error status
    cut: bool = False  # send the reply's headers and first half, then drop the connection
    hang: bool = False  # accept the request and never answer (until the server stops)
    input_tokens: int = 120  # every prompt token, the cached ones too
    output_tokens: int = 30
    cached_tokens: int = 0  # of input_tokens: read from the provider's prompt cache


@dataclass
class Seen:
    method: str
    path: str
    body: Any
    turn: int
    at: float = 0.0  # time.monotonic() when it arrived: how long a client waited between tries


@dataclass
class FakeModel:
    script: list[Turn] = field(default_factory=list)
    # for the first POSTs, in order: a status, or a whole failing Turn (a Retry-After, a cut)
    fail_first: list[int | Turn] = field(default_factory=list)
    sequential: bool = False  # the Nth request gets the Nth turn (a CLI that sends no tools)
    requests: list[Seen] = field(default_factory=list)
    proxied: list[str] = field(default_factory=list)  # hosts a CLI tried to reach through us
    input_tokens: int = 0  # the usage of every reply sent whole, as it reported it
    output_tokens: int = 0
    cached_tokens: int = 0
    # The usage of replies cut before their usage was sent: a real provider may bill what it
    # generated, but no client is told, so no ledger can hold it.
    cut_tokens: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                if self.path.startswith(("http://", "https://")):  # asked as a proxy
                    model._refuse_proxy(self)
                    return
                model._send_json(self, 200, {"data": [], "object": "list"})

            def do_CONNECT(self) -> None:  # an HTTPS request through us as a proxy
                model._refuse_proxy(self)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path.startswith(("http://", "https://")):
                    model._refuse_proxy(self)
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                with contextlib.suppress(OSError):  # the CLI hung up
                    model._answer(self, body if isinstance(body, dict) else {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()  # a hanging answer lets go
        self.server.shutdown()
        self.server.server_close()

    @property
    def posts(self) -> list[Seen]:
        return [r for r in self.requests if r.method == "POST"]

    # -- choosing a reply ---------------------------------------------------------------

    def _answer(self, h: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        path = h.path.split("?")[0]
        if path.endswith("/count_tokens"):
            self._send_json(h, 200, {"input_tokens": 10})
            return
        wire = (
            "anthropic"
            if path.endswith("/messages")
            else "responses"
            if path.endswith("/responses")
            else "chat"
        )
        with self.lock:
            n = len(self.posts) if self.sequential else _assistant_turns(wire, body)
            turn = self.script[n] if n < len(self.script) else Turn(text="done")
            self.requests.append(Seen("POST", path, body, n, time.monotonic()))
            msg_id = f"msg_fake_{len(self.requests)}"  # each reply its own, as the API does
            if self.fail_first:
                first = self.fail_first.pop(0)
                turn = first if isinstance(first, Turn) else Turn(status=first)
        if turn.status != 200:
            kind, message = ERROR_TEXT.get(turn.status, ("api_error", f"HTTP {turn.status}"))
            err = (
                {"type": "error", "error": {"type": kind, "message": message}}
                if wire == "anthropic"
                else {"error": {"message": message, "type": kind, "code": kind}}
            )
            self._send_json(h, turn.status, err, {"retry-after": turn.retry_after})
            return
        if turn.hang:
            self.stopping.wait()
            h.close_connection = True
            return
        # claude's fallback to a whole (unstreamed) reply is sent whole: only streams are cut
        cut = turn.cut and not (wire == "anthropic" and not body.get("stream"))
        with self.lock:
            if cut:
                self.cut_tokens += turn.input_tokens + turn.output_tokens
            else:
                self.input_tokens += turn.input_tokens
                self.output_tokens += turn.output_tokens
                self.cached_tokens += turn.cached_tokens
        call = _shell_call(wire, body, turn.shell, n) if turn.shell else None
        if wire == "anthropic":
            events = _anthropic(turn, call, msg_id)
        elif wire == "responses":
            events = _responses(turn, call)
        elif body.get("stream"):
            events = _chat_stream(turn, call, _include_usage(body))
        else:
            self._send_json(h, 200, _chat_whole(turn, call), cut=turn.cut)
            return
        if wire == "anthropic" and not body.get("stream"):
            self._send_json(h, 200, _anthropic_whole(turn, call))
            return
        self._send_sse(h, events, cut=turn.cut)

    def _refuse_proxy(self, h: BaseHTTPRequestHandler) -> None:
        with self.lock:
            self.proxied.append(h.path)
        h.send_response(403)
        h.send_header("Content-Length", "0")
        h.send_header("Connection", "close")
        h.end_headers()
        h.close_connection = True

    @staticmethod
    def _send_json(
        h: BaseHTTPRequestHandler,
        status: int,
        obj: Any,
        headers: dict[str, str] | None = None,
        *,
        cut: bool = False,
    ) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.send_header("request-id", "req_fake")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        _write(h, data, cut)

    @staticmethod
    def _send_sse(
        h: BaseHTTPRequestHandler, events: list[tuple[str | None, Any]], *, cut: bool = False
    ) -> None:
        out = []
        for name, data in events:
            payload = data if isinstance(data, str) else json.dumps(data)
            out.append((f"event: {name}\n" if name else "") + f"data: {payload}\n\n")
        blob = "".join(out).encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Content-Length", str(len(blob)))
        h.end_headers()
        _write(h, blob, cut)


def _write(h: BaseHTTPRequestHandler, data: bytes, cut: bool) -> None:
    """The whole body, or (cut) its first half and then the connection drops mid-reply."""
    if not cut:
        h.wfile.write(data)
        return
    h.wfile.write(data[: len(data) // 2])
    h.wfile.flush()
    h.close_connection = True
    with contextlib.suppress(OSError):
        h.connection.shutdown(socket.SHUT_RDWR)


def _assistant_turns(wire: str, body: dict[str, Any]) -> int:
    """How far the conversation is: the tool calls it holds (only a tool call continues it).

    Calls are counted, not assistant messages: claude merges consecutive ones.
    """
    if wire == "responses":
        items = body.get("input") if isinstance(body.get("input"), list) else []
        return sum(
            1
            for i in items
            if isinstance(i, dict) and i.get("type") in ("function_call", "local_shell_call")
        )
    messages = body.get("messages") if isinstance(body.get("messages"), list) else []
    n = 0
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        content = m.get("content")
        n += len(m.get("tool_calls") or [])
        if isinstance(content, list):
            n += sum(1 for c in content if isinstance(c, dict) and c.get("type") == "tool_use")
    return n


def _include_usage(body: dict[str, Any]) -> bool:
    opts = body.get("stream_options")
    return isinstance(opts, dict) and bool(opts.get("include_usage"))


def _tools(wire: str, body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """name → JSON schema of its arguments, in any of the three wire formats."""
    out: dict[str, dict[str, Any]] = {}
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        fn = t.get("function") if isinstance(t.get("function"), dict) else t
        name = fn.get("name") or t.get("type")
        schema = fn.get("input_schema") or fn.get("parameters") or {}
        if isinstance(name, str):
            out[name] = schema if isinstance(schema, dict) else {}
    return out


def _shell_call(
    wire: str, body: dict[str, Any], command: str, n: int
) -> tuple[str, dict[str, Any], str]:
    """(tool name, arguments, call id) that run `command` through this CLI's shell tool.

    Each turn's call has its own id: a CLI may merge calls that share one.
    """
    tools = _tools(wire, body)
    name = next((n for n in SHELL_TOOLS if n in tools), "bash")
    props = tools.get(name, {}).get("properties") or {}
    key = "cmd" if "cmd" in props and "command" not in props else "command"
    shape = props.get(key, {}) if isinstance(props, dict) else {}
    value: Any = ["bash", "-lc", command] if shape.get("type") == "array" else command
    args: dict[str, Any] = {key: value}
    if "description" in props and "description" in (tools[name].get("required") or []):
        args["description"] = "run a command"
    return name, args, f"fake{n}"


# -- Anthropic Messages -----------------------------------------------------------------


def _anthropic(
    turn: Turn, call: tuple[str, dict[str, Any], str] | None, msg_id: str = "msg_fake"
) -> list[tuple[str | None, Any]]:
    msg = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_anthropic_input(turn), "output_tokens": 1},
    }
    ev: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": msg})
    ]
    index = 0
    if turn.text:
        ev += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            ("ping", {"type": "ping"}),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": turn.text},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ]
        index = 1
    if call:
        ev += [
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": f"toolu_{call[2]}",
                        "name": call[0],
                        "input": {},
                    },
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(call[1])},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    ev += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": turn.output_tokens},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return ev


def _anthropic_input(turn: Turn) -> dict[str, int]:
    """Anthropic counts the prompt tokens read from its cache apart from `input_tokens`."""
    return {
        "input_tokens": turn.input_tokens - turn.cached_tokens,
        "cache_read_input_tokens": turn.cached_tokens,
    }


def _anthropic_whole(turn: Turn, call: tuple[str, dict[str, Any], str] | None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    if call:
        content.append(
            {"type": "tool_use", "id": f"toolu_{call[2]}", "name": call[0], "input": call[1]}
        )
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": "tool_use" if call else "end_turn",
        "stop_sequence": None,
        "usage": {**_anthropic_input(turn), "output_tokens": turn.output_tokens},
    }


# -- OpenAI Responses -------------------------------------------------------------------


def _responses(
    turn: Turn, call: tuple[str, dict[str, Any], str] | None
) -> list[tuple[str | None, Any]]:
    now = int(time.time())
    resp: dict[str, Any] = {
        "id": "resp_fake",
        "object": "response",
        "created_at": now,
        "status": "in_progress",
        "model": "gpt-fake",
        "output": [],
    }
    ev: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "response": resp}),
        ("response.in_progress", {"type": "response.in_progress", "response": resp}),
    ]
    items: list[dict[str, Any]] = []
    if turn.text:
        item = {
            "type": "message",
            "id": "msg_fake",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
        }
        ev += [
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**item, "status": "in_progress", "content": []},
                },
            ),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_fake",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": turn.text,
                },
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
        ]
        items.append(item)
    if call:
        item = {
            "type": "function_call",
            "id": f"fc_{call[2]}",
            "call_id": f"call_{call[2]}",
            "name": call[0],
            "arguments": json.dumps(call[1]),
            "status": "completed",
        }
        ev += [
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": len(items), "item": item},
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": len(items), "item": item},
            ),
        ]
        items.append(item)
    done = {
        **resp,
        "status": "completed",
        "output": items,
        "usage": {
            "input_tokens": turn.input_tokens,
            "input_tokens_details": {"cached_tokens": turn.cached_tokens},
            "output_tokens": turn.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": turn.input_tokens + turn.output_tokens,
        },
    }
    ev.append(("response.completed", {"type": "response.completed", "response": done}))
    return ev


# -- OpenAI chat completions -------------------------------------------------------------


def _chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "gpt-fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _usage(turn: Turn) -> dict[str, Any]:
    return {
        "prompt_tokens": turn.input_tokens,
        "completion_tokens": turn.output_tokens,
        "total_tokens": turn.input_tokens + turn.output_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
    }


def _tool_call(call: tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    return {
        "index": 0,
        "id": f"call_{call[2]}",
        "type": "function",
        "function": {"name": call[0], "arguments": json.dumps(call[1])},
    }


def _chat_stream(
    turn: Turn, call: tuple[str, dict[str, Any], str] | None, include_usage: bool
) -> list[tuple[str | None, Any]]:
    ev: list[tuple[str | None, Any]] = [(None, _chunk({"role": "assistant", "content": ""}, None))]
    if turn.text:
        ev.append((None, _chunk({"content": turn.text}, None)))
    if call:
        ev.append((None, _chunk({"tool_calls": [_tool_call(call)]}, None)))
    ev.append((None, _chunk({}, "tool_calls" if call else "stop")))
    if include_usage:
        last = _chunk({}, None)
        last["choices"] = []
        last["usage"] = _usage(turn)
        ev.append((None, last))
    ev.append((None, "[DONE]"))
    return ev


def _chat_whole(turn: Turn, call: tuple[str, dict[str, Any], str] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if call:
        message["tool_calls"] = [{k: v for k, v in _tool_call(call).items() if k != "index"}]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "gpt-fake",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}
        ],
        "usage": _usage(turn),
    }
