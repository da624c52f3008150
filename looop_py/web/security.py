"""The page's token, CSRF token and Origin/Host checks (pure but for the token file).

The token is random per `looop serve`, printed in the URL once, kept in an
HttpOnly SameSite=Strict cookie after the first visit, and stored 0600 in
state/web-token so a script on the same machine can use it. The CSRF token is
an HMAC of the token, so it needs no server-side store; every POST must carry
it and, when the browser sends one, an Origin (or Referer) naming this server.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from looop_py.workdir.paths import Paths

COOKIE = "looop_token"


def cookie_name(port: int | None) -> str:
    """One cookie per port: cookies ignore ports, so two servers would clobber each other's."""
    return f"{COOKIE}_{port or 80}"


LOOPBACK_NAMES = ("localhost",)


def token_path(paths: Paths) -> Path:
    return paths.state / "web-token"


def new_token(paths: Paths) -> str:
    """A fresh token, written 0600 (replacing the last server's)."""
    token = secrets.token_urlsafe(32)
    path = token_path(paths)
    paths.state.mkdir(exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, token.encode() + b"\n")
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token


def csrf_for(token: str) -> str:
    return hmac.new(token.encode(), b"looop-csrf", hashlib.sha256).hexdigest()[:32]


def same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_ok(host_header: str | None, allowed: frozenset[str]) -> bool:
    """The Host header names this server (a rebinding defence); `allowed` holds host names."""
    if not host_header:
        return False
    name = urlsplit(f"//{host_header}").hostname or ""
    return name in allowed


def origin_ok(origin: str | None, referer: str | None, host_header: str | None) -> bool:
    """A POST's Origin (else Referer) names this server; a client that sends neither passes
    (it is not a browser: the token and CSRF token still apply)."""
    source = origin if origin not in (None, "") else referer
    if source in (None, ""):
        return True
    if source == "null":
        return False
    return bool(host_header) and urlsplit(source).netloc == host_header
