"""Remote use and login: the Host check (port included), the addresses a server answers to,
one-time codes, expiring sessions, logout, one token per server, Bearer in any case."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from looop_py.web import app as web_app
from looop_py.web import security
from looop_py.web.sessions import CODE_S, SESSION_S, Sessions
from looop_py.workdir.paths import Paths

BASE = "http://127.0.0.1:8765"


def _client(wd: Paths, base: str = BASE, **kw: object) -> tuple[TestClient, str]:
    token = security.new_token(wd, 8765)
    return TestClient(web_app.build(wd, token, **kw), base_url=base), token  # type: ignore[arg-type]


def _code(client: TestClient) -> str:
    return str(client.app.state.web.sessions.new_code(time.time()))  # type: ignore[attr-defined]


def test_a_foreign_host_or_another_port_is_refused(wd: Paths) -> None:
    client, token = _client(wd)
    auth = {"Authorization": f"Bearer {token}"}
    for host in ("evil.example", "evil.example:8765", "127.0.0.1:9999", "127.0.0.1", ""):
        r = client.get("/", headers={**auth, "Host": host})
        assert r.status_code == 403, host
    assert client.get("/", headers={**auth, "Host": "localhost:8765"}).status_code == 200
    assert client.get("/", headers={**auth, "Host": "[::1]:8765"}).status_code == 200


def test_a_wildcard_bind_answers_to_its_loopback_and_interface_addresses() -> None:
    names = security.answers_to("0.0.0.0")
    assert "127.0.0.1" in names and "localhost" in names
    assert all(":" not in n for n in names)  # an IPv4 wildcard is not reached over IPv6
    assert any(n not in security.LOOPBACK for n in names)  # this machine's own address
    allowed = frozenset(names)
    assert security.host_ok(f"{names[0]}:8765", allowed, 8765)
    assert not security.host_ok("evil.example:8765", allowed, 8765)
    assert security.answers_to("127.0.0.1")[0] == "127.0.0.1"


def test_a_login_code_works_once_and_the_token_never_goes_in_a_url(wd: Paths) -> None:
    client, token = _client(wd)
    assert client.get(f"/?token={token}", follow_redirects=False).status_code == 401
    assert "set-cookie" not in client.get(f"/?token={token}", follow_redirects=False).headers
    assert client.get("/?code=made-up", follow_redirects=False).status_code == 401
    code = _code(client)
    r = client.get(f"/journal?q=a%26b&code={code}&x=%2F", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/journal?q=a%26b&x=%2F"  # the query's encoding kept
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "max-age" in cookie
    assert token not in r.headers["set-cookie"]  # the cookie holds a session, not the token
    assert client.get("/").status_code == 200
    other = TestClient(client.app, base_url=BASE)
    assert other.get(f"/?code={code}", follow_redirects=False).status_code == 401  # spent
    assert other.get("/").status_code == 401


def test_logout_ends_the_session_and_login_takes_the_token_in_a_post(wd: Paths) -> None:
    client, token = _client(wd)
    assert client.post("/login", data={"token": "wrong"}).status_code == 401
    assert client.post("/login", data={"token": token}, follow_redirects=False).status_code == 303
    assert client.get("/").status_code == 200
    r = client.post("/logout", headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and client.get("/").status_code == 200
    assert client.post("/logout", follow_redirects=False).status_code == 303
    assert client.get("/").status_code == 401


def test_sessions_and_codes_expire() -> None:
    s = Sessions()
    code = s.new_code(1000.0)
    assert s.redeem(code, 1000.0 + CODE_S + 1) is None
    sid = s.start(1000.0)
    assert s.valid(sid, 1000.0 + SESSION_S - 1)
    assert not s.valid(sid, 1000.0 + SESSION_S + 1)
    assert not s.valid(sid, 1000.0)  # dropped once seen expired
    assert not s.valid(None, 1000.0) and not s.valid("", 1000.0)


def test_two_servers_on_one_work_dir_keep_their_own_tokens(wd: Paths) -> None:
    first = security.new_token(wd, 8765)
    second = security.new_token(wd, 8766)
    assert security.token_path(wd, 8765).read_text().strip() == first != second
    security.drop_token(wd, 8765, "not-its-token")
    assert security.token_path(wd, 8765).exists()
    security.drop_token(wd, 8765, first)
    assert not security.token_path(wd, 8765).exists()
    assert security.token_path(wd, 8766).read_text().strip() == second


def test_bearer_in_any_case_and_a_favicon(wd: Paths, tmp_path: Path) -> None:
    client, token = _client(wd)
    for scheme in ("Bearer", "bearer", "BEARER"):
        r = client.get("/", headers={"Authorization": f"{scheme} {token}", "Accept": "text/html"})
        assert r.status_code == 200, scheme
    assert client.get("/", headers={"Authorization": f"Basic {token}"}).status_code == 401
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg")
    assert client.get("/app.js").headers["content-type"].startswith("text/javascript")
