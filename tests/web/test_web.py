"""The page through Starlette's test client: every page, the JSON API, token, CSRF, Origin."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.beat.pulse import beat
from looop_py.web import app as web_app
from looop_py.web import security
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, write_sensor

BASE = "http://127.0.0.1:8765"


def held(wd: Paths, move: dict) -> mailbox.Ask:
    """A move the gate held back, as the pulse would hold it."""
    from looop_py.moves import gate, union

    admission = gate.admit(open_wd(wd), union.parse(move), time.time())
    assert admission.held is not None
    return mailbox.get_ask(open_wd(wd), admission.held)


def _approval(wd: Paths, marker: Path) -> mailbox.Ask:
    return held(wd, {"action": "run_shell", "cmd": f"echo ran >> {marker}"})


def _client(wd: Paths, *, read_only: bool = False) -> tuple[TestClient, str]:
    token = security.new_token(wd, 8765)
    client = TestClient(web_app.build(wd, token, read_only=read_only), base_url=BASE)
    return client, token


def _code(client: TestClient) -> str:
    """A one-time login code, as `looop serve` prints one."""
    return str(client.app.state.web.sessions.new_code(time.time()))  # type: ignore[attr-defined]


def _logged_in(wd: Paths, **kw: bool) -> tuple[TestClient, str]:
    client, token = _client(wd, **kw)
    r = client.get(f"/?code={_code(client)}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"
    assert "httponly" in r.headers["set-cookie"].lower()
    return client, token


def test_the_token_file_is_private(wd: Paths) -> None:
    token = security.new_token(wd, 8765)
    path = security.token_path(wd, 8765)
    assert path.read_text().strip() == token
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_every_page_renders_and_has_a_json_twin(wd: Paths, tmp_path: Path) -> None:
    write_sensor(wd, "s", "echo 1")
    beat(open_wd(wd))
    _approval(wd, tmp_path / "m")
    mailbox.open_ask(
        open_wd(wd), prompt="which db?", asker="human", now=time.time(), options=("a", "b")
    )
    client, _ = _logged_in(wd)
    ts = jsonio.loads(wd.events.read_bytes().splitlines()[-1])["ts"]
    for path in ("/", "/?days=7", "/asks", "/workers", "/loops", "/journal?q=x", f"/beats/{ts}"):
        page = client.get(path)
        assert page.status_code == 200, (path, page.text)
        assert "<!doctype html>" in page.text and "http://" not in page.text.replace(
            'xmlns="http://www.w3.org/2000/svg"', ""
        ), path  # no CDN, no external asset
        twin = client.get(path, headers={"accept": "application/json"})
        assert twin.status_code == 200 and isinstance(twin.json(), dict), path
    asks = client.get("/asks?format=json").json()
    assert [a["id"] for a in asks["asks"]] == ["decider-1", "human-1"]
    assert "echo ran" in asks["asks"][0]["would_run"]["text"]
    assert "echo ran" in client.get("/asks").text  # the page shows exactly what would run
    overview = client.get("/?format=json").json()
    assert overview["status"]["sensors"]["ok"] == ["s"] and overview["counts"]["decided"] == 1
    assert "<svg" in client.get("/").text


def test_no_token_gets_401_and_changes_nothing(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "m"
    ask = _approval(wd, marker)
    client, token = _client(wd)
    csrf = security.csrf_for(token)
    assert client.get("/").status_code == 401
    assert client.get("/asks?format=json").status_code == 401
    assert client.get("/?token=wrong").status_code == 401
    r = client.post(f"/asks/{ask.id}/approve", data={"csrf": csrf})
    assert r.status_code == 401
    assert not marker.exists() and mailbox.get_answer(open_wd(wd), ask.id) is None


def test_post_without_csrf_or_from_another_origin_gets_403(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "m"
    ask = _approval(wd, marker)
    q = mailbox.open_ask(open_wd(wd), prompt="ok?", asker="human", now=time.time())
    client, token = _logged_in(wd)
    csrf = security.csrf_for(token)
    url = f"/asks/{ask.id}/approve"
    assert client.post(url).status_code == 403
    assert client.post(url, data={"csrf": "nope"}).status_code == 403
    evil = {"origin": "http://evil.example"}
    assert client.post(url, data={"csrf": csrf}, headers=evil).status_code == 403
    assert client.post(url, data={"csrf": csrf}, headers={"origin": "null"}).status_code == 403
    rebound = {"host": "evil.example:8765"}
    assert client.post(url, data={"csrf": csrf}, headers=rebound).status_code == 403
    assert client.get(url).status_code == 405  # state changes are POST only
    a = client.post(f"/asks/{q.id}/answer", data={"answer": "yes"}, headers=evil)
    assert a.status_code == 403
    assert not marker.exists()
    assert (
        mailbox.get_answer(open_wd(wd), ask.id) is None
        and mailbox.get_answer(open_wd(wd), q.id) is None
    )


def test_answer_approve_and_deny_through_the_page(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "m"
    ask = _approval(wd, marker)
    other = _approval(wd, tmp_path / "never")
    q = mailbox.open_ask(
        open_wd(wd), prompt="ok?", asker="human", now=time.time(), options=("yes", "no")
    )
    client, token = _logged_in(wd)
    csrf = security.csrf_for(token)
    same = {"origin": BASE, "accept": "text/html"}
    r = client.post(
        f"/asks/{ask.id}/approve", data={"csrf": csrf}, headers=same, follow_redirects=False
    )
    assert r.status_code == 303 and marker.read_text() == "ran\n"
    again = client.post(f"/asks/{ask.id}/approve", headers={"x-csrf-token": csrf})
    assert again.status_code == 409 and marker.read_text() == "ran\n"  # exactly once
    d = client.post(f"/asks/{other.id}/deny", data={"csrf": csrf, "reason": "no"}).json()
    assert d["verdict"] == "denied" and not (tmp_path / "never").exists()
    bad = client.post(f"/asks/{q.id}/answer", data={"csrf": csrf, "answer": "maybe"})
    assert bad.status_code == 409
    got = client.post(f"/asks/{q.id}/answer", data={"csrf": csrf, "answer": "yes"}).json()
    assert got["answer"] == "yes" and mailbox.get_answer(open_wd(wd), q.id).text == "yes"


def test_read_only_refuses_every_post(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "m"
    ask = _approval(wd, marker)
    client, token = _logged_in(wd, read_only=True)
    main = client.get("/asks").text.split("<main", 1)[1]
    assert "<form" not in main and "/confirm" not in main  # only the header's log out
    r = client.post(f"/asks/{ask.id}/approve", data={"csrf": security.csrf_for(token)})
    assert r.status_code == 403 and not marker.exists()


def test_bearer_token_works_for_scripts(wd: Paths) -> None:
    client, token = _client(wd)
    r = client.get(
        "/workers", headers={"authorization": f"Bearer {token}", "accept": "application/json"}
    )
    assert r.status_code == 200 and r.json()["workers"] == []


def test_serve_refuses_a_remote_bind_without_the_flag(wd: Paths) -> None:
    r = invoke_looop("-C", str(wd.root), "serve", "--host", "0.0.0.0")
    assert r.returncode == 2 and "--allow-remote" in r.stderr


def test_report_html_is_self_contained(wd: Paths, tmp_path: Path) -> None:
    write_sensor(wd, "s", "echo 1")
    beat(open_wd(wd))
    out = tmp_path / "r.html"
    r = invoke_looop("-C", str(wd.root), "report", "--html", str(out))
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "<svg" in html and "<script" not in html and "<link" not in html
    assert "<form" not in html


def test_run_a_round_now_from_the_loops_page(wd: Paths) -> None:
    (wd.goals / "tidy.md").write_text(
        "---\nintent: tidy\nlevel: L1\ncadence: daily 03:00\nruntime: shell\n"
        'maker: |\n  "$LOOOP_BIN" done --summary made\n'
        'checker: |\n  "$LOOOP_BIN" done --summary checked\n---\n# tidy\n'
    )
    client, token = _logged_in(wd)
    assert 'id="run-tidy"' in client.get("/loops").text
    got = client.post("/loops/tidy/run", data={"csrf": security.csrf_for(token)})
    assert got.status_code == 200, got.text
    assert got.json()["loop"] == "tidy"
    rounds = client.get("/loops?format=json").json()["rounds"]
    assert [r["id"] for r in rounds] == [got.json()["round"]]
    again = client.post("/loops/tidy/run", data={"csrf": security.csrf_for(token)})
    assert again.status_code == 409 and "already has a live round" in again.json()["error"]


def test_pages_forbid_framing_scripts_and_outside_assets(wd: Paths) -> None:
    client, _ = _logged_in(wd)
    for path in ("/", "/asks"):
        r = client.get(path)
        assert r.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
        assert "default-src 'none'" in r.headers["content-security-policy"]
    assert client.get("/nowhere").status_code == 404
    unauth = TestClient(client.app, base_url=BASE).get("/")
    assert unauth.status_code == 401 and unauth.headers["x-frame-options"] == "DENY"


def test_kill_and_tell_a_worker_from_the_page(wd: Paths) -> None:
    script = 'for i in $(seq 1 600); do echo "tick $i"; sleep 0.1; done\n'
    r = invoke_looop("-C", str(wd.root), "worker", "start", "w1", "-", input=script)
    assert r.returncode == 0, r.stderr
    client, token = _logged_in(wd)
    csrf = security.csrf_for(token)
    told = client.post("/workers/w1/tell", data={"csrf": csrf, "text": "wrap up"})
    assert told.status_code == 200 and told.json()["text"] == "wrap up"
    page = client.get("/workers/w1?format=json").json()
    assert [m["text"] for m in page["told"]] == ["wrap up"]
    assert page["worker"]["alive"] is True
    assert 'id="kill-w1"' in client.get("/workers/w1").text
    assert (
        client.post("/workers/w1/kill", headers={"origin": "http://evil.example"}).status_code
        == 403
    )
    killed = client.post("/workers/w1/kill", data={"csrf": csrf})
    assert killed.status_code == 200 and killed.json()["was_alive"] is True
    assert client.get("/workers/w1?format=json").json()["worker"]["alive"] is False


def test_withdraw_an_ask_from_the_page(wd: Paths) -> None:
    q = mailbox.open_ask(open_wd(wd), prompt="still there?", asker="human", now=time.time())
    client, token = _logged_in(wd)
    assert client.get("/asks?format=json").json()["asks"][0]["state"] == "pending"
    r = client.post(f"/asks/{q.id}/withdraw", data={"csrf": security.csrf_for(token)})
    assert r.status_code == 200 and r.json()["verdict"] == "withdrawn"
    assert client.get("/asks?format=json").json()["asks"] == []


def test_the_overview_shows_todays_spend_by_source_and_cache_hits(wd: Paths) -> None:
    from looop_py.spend import ledger

    now = time.time()
    for c in (
        ledger.Charge("decide:r1", "decider", 1000, 0.01, 1000, 600),
        ledger.Charge("worker:tidy-1.maker", "loop:tidy", 5000, 0.05, 4000, 1400),
    ):
        ledger.record_charge(open_wd(wd), now, c)
    client, _ = _logged_in(wd)
    page = client.get("/").text
    assert "decider: 1000 tokens · $0.0100" in page and "loop:tidy: 5000 tokens" in page
    assert "cache hits: 40%" in page


def test_the_spend_chart_counts_every_source_as_the_budget_does(wd: Paths) -> None:
    from looop_py.spend import ledger
    from looop_py.web import data

    now = time.time()
    yesterday = now - 86400
    ledger.record_charge(open_wd(wd), yesterday, ledger.Charge("worker:w1", "workers", 700, 0.07))
    ledger.record_charge(open_wd(wd), now, ledger.Charge("decide:r1", "decider", 100, 0.01))
    ledger.record_charge(open_wd(wd), now, ledger.Charge("worker:m", "loop:tidy", 400, 0.04))
    days = data.spend_by_day(open_wd(wd), now)
    assert [d["tokens"] for d in days[-2:]] == [700, 500]
    assert days[-1]["sources"] == "all" and days[-1]["by_source"]["loop:tidy"]["usd"] == 0.04
    client, _ = _logged_in(wd)
    page = client.get("/").text
    assert "Spend per day" in page and "decides, loop rounds and workers" in page
    assert "500 (decider 100, loop:tidy 400)" in page  # the bar's title splits it by source
