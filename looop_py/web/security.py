"""The page's token, CSRF token, Host/Origin checks and the addresses a server answers to.

The token is random per `looop serve` process, stored 0600 in
state/web-token-<port> (one file per server, so a second server never replaces
the first's) for scripts on the same machine (`Authorization: Bearer`). A
browser never holds it: it logs in with a one-time code (web/sessions.py). The
CSRF token is an HMAC of the token, so it needs no server-side store; every
POST must carry it and, when the browser sends one, an Origin (or Referer)
naming this server.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from looop_py.workdir.paths import Paths

COOKIE = "looop_session"
MAX_BODY = 256 * 1024  # a POST body larger than this is read as no fields at all
# Nothing from elsewhere, script only from this server, no framing (clickjacking), no
# Referer to other sites.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "script-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a POST's Origin "null"
    "Cache-Control": "no-store",
}

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 - names, not a bind


def cookie_name(port: int | None) -> str:
    """One cookie per port: cookies ignore ports, so two servers would clobber each other's."""
    return f"{COOKIE}_{port or 80}"


def token_path(paths: Paths, port: int) -> Path:
    return paths.state / f"web-token-{port}"


def new_token(paths: Paths, port: int) -> str:
    """A fresh token for the server on `port`, written 0600 (another port's file untouched)."""
    token = secrets.token_urlsafe(32)
    path = token_path(paths, port)
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


def drop_token(paths: Paths, port: int, token: str) -> None:
    """Remove the token file when the server stops, unless another server took the port since."""
    path = token_path(paths, port)
    with contextlib.suppress(OSError):
        if path.read_text().strip() == token:
            path.unlink()


def csrf_for(token: str) -> str:
    return hmac.new(token.encode(), b"looop-csrf", hashlib.sha256).hexdigest()[:32]


def same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


def bearer(header: str | None) -> str | None:
    """The credentials of an `Authorization: Bearer …` header; the scheme in any case."""
    scheme, _, rest = (header or "").strip().partition(" ")
    return rest.strip() or None if scheme.lower() == "bearer" else None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bracket(name: str) -> str:
    """A host name as it appears in a URL or Host header (IPv6 in brackets)."""
    return f"[{name}]" if ":" in name else name


def answers_to(bind: str) -> tuple[str, ...]:
    """The names a server bound to `bind` is reached by, the one to print first.

    Loopback: the address and localhost. One address: it and this machine's names.
    A wildcard (0.0.0.0, ::): every address of this machine's interfaces we can learn
    without a dependency, its names, and loopback."""
    if bind == "localhost":
        return ("localhost", "127.0.0.1", "::1")
    if is_loopback(bind):
        return (bind, "localhost")
    if bind not in WILDCARD:
        return (bind, *_names())
    found: list[str] = []
    for family, probe in ((socket.AF_INET, "10.254.254.254"), (socket.AF_INET6, "fd00::1")):
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((probe, 9))  # UDP: no packet is sent, the kernel picks the route's address
            found.append(str(s.getsockname()[0]))
    for name in _names():
        with contextlib.suppress(OSError):
            for info in socket.getaddrinfo(name, None):
                found.append(str(info[4][0]))
    found += [*_names(), "127.0.0.1", "localhost", "::1"]
    if bind == "0.0.0.0":  # noqa: S104 - an IPv4 wildcard does not answer on IPv6
        found = [h for h in found if ":" not in h]
    return tuple(dict.fromkeys(h for h in found if h and "%" not in h))


def _names() -> list[str]:
    return list(dict.fromkeys(n for n in (socket.gethostname(), socket.getfqdn()) if n))


def host_ok(host_header: str | None, names: frozenset[str], port: int) -> bool:
    """The Host header names this server, name and port (a DNS-rebinding defence)."""
    if not host_header:
        return False
    try:
        parts = urlsplit(f"//{host_header}")
        given = parts.port or 80
    except ValueError:
        return False
    return (parts.hostname or "") in {n.lower() for n in names} and given == port


def origin_ok(origin: str | None, referer: str | None, host_header: str | None) -> bool:
    """A POST's Origin (else Referer) names this server; a client that sends neither passes
    (it is not a browser: the token and CSRF token still apply)."""
    source = origin if origin not in (None, "") else referer
    if source in (None, ""):
        return True
    if source == "null":
        return False
    return bool(host_header) and urlsplit(source).netloc == host_header


def form_fields(body: bytes, content_type: str) -> dict[str, str]:
    """A POST's fields: a form, or a JSON object from a script; {} for anything else."""
    if len(body) > MAX_BODY:
        return {}
    if content_type.startswith("application/json"):
        try:
            got = json.loads(body or b"{}")
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}
