"""One JSON POST to a model API, with timeouts and bounded retries. Standard library only.

Each failure is typed where it is seen (base.py): a 408, 429 or 5xx answer
and a connection the server dropped are a TemporaryError carrying the
server's Retry-After (seconds or an HTTP date, or OpenAI's retry-after-ms);
any other error status, a server that cannot be reached and a reply that is
not JSON are permanent. The retry loop retries only a TemporaryError: the
delay doubles from `backoff_s`, the server's Retry-After replaces it.
Attempts are bounded by `max_retries` and the time spent waiting by
`max_wait_s`, so a beat never sleeps for longer than the user allowed. A
timeout (TimedOut) is not retried: a server too slow once is likely too slow
again, and the beat holds the pulse lock.
"""

from __future__ import annotations

import email.utils
import http.client
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from looop_py import jsonio
from looop_py.deciders import pricing
from looop_py.deciders.base import (
    DecideError,
    Decision,
    InvalidReply,
    PermanentError,
    TemporaryError,
    TimedOut,
    Usage,
    temporary_status,
)
from looop_py.errors import ConfigError
from looop_py.workdir.config import DeciderConfig

# A provider's reply → (move value, usage, why it stopped); raises a DecideError.
ReadReply = Callable[[Any, int], tuple[Any, Usage | None, str | None]]
# A provider's reply → the usage it reports, whatever else it holds.
ReadUsage = Callable[[Any], Usage | None]

MAX_BODY = 16 * 1024 * 1024
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "[::1]"}  # noqa: S104 - a host name, not a bind


@dataclass(frozen=True)
class RetryPolicy:
    timeout_s: float = 600.0
    max_retries: int = 4
    backoff_s: float = 1.0
    max_wait_s: float = 60.0


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: Mapping[str, str]
    attempts: int
    waited_s: float

    def json(self, provider: str) -> Any:
        try:
            return jsonio.loads(self.body)
        except jsonio.JSONDecodeError:
            raise InvalidReply(
                f"{provider} answered HTTP {self.status} with a body that is not JSON: "
                f"{_snippet(self.body)}"
            ) from None


def check_url(url: str) -> str:
    """Only http(s): a base_url must never make urllib read a file: or ftp: URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"[decider] base_url {url!r} is not an http(s) URL",
            'e.g. base_url = "https://api.openai.com/v1" or "http://localhost:11434/v1"',
        )
    return url


def is_loopback(url: str) -> bool:
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host in _LOOPBACK or host.endswith(".localhost") or host.startswith("127.")


def _snippet(body: bytes, limit: int = 200) -> str:
    text = " ".join(body[: limit * 4].decode("utf-8", "replace").split())
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


def error_message(body: bytes) -> str:
    """The provider's own words for an error, from the usual `{"error": …}` shapes."""
    try:
        data = jsonio.loads(body)
    except jsonio.JSONDecodeError:
        return _snippet(body)
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("type")
            if isinstance(msg, str):
                return msg[:300]
        elif isinstance(err, str):
            return err[:300]
    return _snippet(body)


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asked us to wait, if it said so in a form we understand."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def status_error(
    provider: str, status: int, body: bytes, headers: Mapping[str, str], hint: str | None
) -> DecideError:
    """What an error status means: temporary (with how long the server asked to wait) or
    permanent (with the provider's own words)."""
    said = error_message(body)
    if temporary_status(status):
        return TemporaryError(f"HTTP {status}: {said}", delay=retry_after(headers, time.time()))
    return PermanentError(f"{provider} answered HTTP {status}: {said}", hint)


def post_json(
    url: str,
    payload: Any,
    headers: Mapping[str, str],
    *,
    provider: str,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
    hint: str | None = None,
) -> Reply:
    """POST `payload` as JSON; the first 2xx reply, or a typed DecideError naming why not."""
    check_url(url)
    data = jsonio.dumps(payload)
    # A proxy from the environment must not capture a local model server.
    handlers = [urllib.request.ProxyHandler({})] if is_loopback(url) else []
    opener = urllib.request.build_opener(*handlers)
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        request = urllib.request.Request(url, data=data, method="POST")  # noqa: S310
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json")
        for name, value in headers.items():
            request.add_header(name, value)
        try:
            status, body, reply_headers = _attempt(opener, request, policy.timeout_s, url)
            if not 200 <= status <= 299:
                raise status_error(provider, status, body, reply_headers, hint)
        except TimedOut:
            raise
        except TemporaryError as exc:
            why = exc.message
            if attempt > policy.max_retries:
                raise TemporaryError(
                    f"{provider} failed after {attempt} attempt(s); last: {why}", delay=exc.delay
                ) from None
            delay = (
                exc.delay
                if exc.delay is not None
                else policy.backoff_s * 2 ** (attempt - 1) * random.uniform(1.0, 1.1)
            )
            if waited + delay > policy.max_wait_s:
                raise TemporaryError(
                    f"{provider} failed after {attempt} attempt(s); last: {why}; waiting "
                    f"{delay:.1f}s more would pass max_wait_s={policy.max_wait_s:g}",
                    delay=delay,
                ) from None
            sleep(delay)
            waited += delay
            continue
        return Reply(status, body, reply_headers, attempt, waited)


def _attempt(
    opener: urllib.request.OpenerDirector, request: urllib.request.Request, timeout: float, url: str
) -> tuple[int, bytes, dict[str, str]]:
    """(status, body, lower-cased headers) of whatever the server answered.

    No answer is a typed error: a dropped connection or a broken reply is temporary, a
    timeout TimedOut, a server that cannot be reached permanent.
    """
    try:
        with opener.open(request, timeout=timeout) as resp:
            body = resp.read(MAX_BODY + 1)
            status, hdrs = resp.status, resp.headers
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read(MAX_BODY + 1)
        except (OSError, http.client.HTTPException):
            body = b""
        status, hdrs = exc.code, exc.headers
    except TimeoutError as exc:
        raise TimedOut(f"no answer from {url} within {timeout:g}s", "raise timeout_s") from exc
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, TimeoutError):
            raise TimedOut(f"no answer from {url} within {timeout:g}s", "raise timeout_s") from exc
        if isinstance(reason, ConnectionResetError | ConnectionAbortedError):
            raise TemporaryError(f"connection dropped ({reason})") from exc
        raise PermanentError(
            f"cannot reach {url}: {reason}", "check base_url and that the server is running"
        ) from exc
    except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
        raise TemporaryError(f"connection dropped ({exc.__class__.__name__})") from exc
    except http.client.HTTPException as exc:
        raise TemporaryError(f"broken HTTP reply ({exc.__class__.__name__})") from exc
    if len(body) > MAX_BODY:
        raise InvalidReply(f"the reply from {url} is larger than {MAX_BODY} bytes")
    headers = {k.lower(): v for k, v in (hdrs.items() if hdrs is not None else [])}
    return status, body, headers


def decide(
    url: str,
    body: dict[str, Any],
    headers: dict[str, str],
    *,
    backend: str,
    cfg: DeciderConfig,
    policy: RetryPolicy,
    sleep: Callable[[float], None],
    hint: str,
    read_reply: ReadReply,
    read_usage: ReadUsage,
    stop_key: str,
    request_id_header: str,
) -> Decision:
    """One decide over HTTP, as both model APIs do it: post, read the move, price it.

    A reply that does not hold a move keeps its raw body on the DecideError, so
    runs/<id>/ archives what the provider actually said, and the usage it reports, so
    the ledger charges what the provider billed.
    """
    started = time.monotonic()
    reply = post_json(url, body, headers, provider=backend, policy=policy, sleep=sleep, hint=hint)
    latency = time.monotonic() - started
    raw = reply.body.decode("utf-8", "replace")
    try:
        data = reply.json(backend)
    except DecideError as exc:
        exc.raw = raw
        raise
    try:
        move, usage, stop = read_reply(data, cfg.max_tokens)
    except DecideError as exc:
        exc.raw, exc.usage = raw, pricing.priced(read_usage(data), cfg)
        raise
    meta = {
        "backend": backend,
        "model": cfg.model,
        "attempts": reply.attempts,
        "waited_s": round(reply.waited_s, 3),
        "latency_s": round(latency, 3),
        stop_key: stop,
        "request_id": reply.headers.get(request_id_header),
    }
    return Decision(move=move, raw=raw, usage=pricing.priced(usage, cfg), meta=meta)
