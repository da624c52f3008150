"""The views a human steers from: beats with their results, an ask's history, goals,
sensors with their signal's history, rounds, and a journal search that counts every match."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

from starlette.testclient import TestClient

from looop_py.asks import mailbox
from looop_py.beat.pulse import beat
from looop_py.web import app as web_app
from looop_py.web import security
from looop_py.workdir.paths import Paths
from tests.beat.test_decide import Seq
from tests.conftest import open_wd, write_sensor
from tests.web.test_web import held

BASE = "http://127.0.0.1:8765"


def _logged_in(wd: Paths) -> tuple[TestClient, str]:
    token = security.new_token(wd, 8765)
    client = TestClient(web_app.build(wd, token), base_url=BASE)
    code = client.app.state.web.sessions.new_code(time.time())  # type: ignore[attr-defined]
    assert client.get(f"/?code={code}", follow_redirects=False).status_code == 303
    return client, token


def test_what_is_not_there_is_a_404_and_hostile_ids_go_nowhere(wd: Paths) -> None:
    client, _ = _logged_in(wd)
    for path in (
        "/goals/nope",
        "/goals/..%2F..%2Fetc%2Fpasswd",
        "/sensors/nope",
        "/sensors/.hidden",
        "/rounds/nope",
        "/asks/nope",
        "/asks/nope/confirm",
    ):
        assert client.get(path).status_code == 404, path
    (wd.goals / "bad.md").write_text("---\nkey: [unclosed\n---\n<script>alert(1)</script>\n")
    page = client.get("/goals/bad")
    assert page.status_code == 200 and "frontmatter" in page.text
    assert "<script>alert(1)" not in page.text and "&lt;script&gt;alert(1)" in page.text


def test_the_beats_view_shows_each_decision_with_what_ran_and_how_it_went(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "noop"\n[gates]\nshell_allow = ["ls *"]\n')
    beat(open_wd(wd), decider=Seq({"action": "noop", "reason": "all quiet"}))
    beat(
        open_wd(wd), decider=Seq({"action": "run_shell", "cmd": "ls /no-such-dir-oops"}), force=True
    )
    client, _ = _logged_in(wd)
    got = client.get("/beats?format=json").json()
    failed, quiet = got["beats"][0], got["beats"][1]
    assert quiet["decided"] == "noop · all quiet" and quiet["result"]["ok"] is True
    assert failed["outcome"] == "failed" and failed["action"] == "run_shell"
    assert failed["result"]["exit_code"] == 2 and "no-such-dir-oops" in failed["result"]["output"]
    html = client.get("/beats").text
    assert "No such file" in html and "command failed (exit 2)" in html and "all quiet" in html
    one = client.get(f"/beats/{failed['ts']}").text
    assert "What ran" in one and "exit code 2" in one


def test_a_beat_whose_decider_reads_no_prompt_says_so_on_its_page(wd: Paths) -> None:
    wd.config.write_text('[decider]\nbackend = "rules"\n')
    beat(open_wd(wd), force=True)  # rules: no prompt is built, runs/<id>/ has no prompt.md
    beat(open_wd(wd), decider=Seq({"action": "noop", "reason": "read it"}), force=True)
    client, _ = _logged_in(wd)
    read, rules = client.get("/beats?format=json").json()["beats"][:2]
    page = client.get(f"/beats/{rules['ts']}").text
    assert 'id="no-prompt"' in page and "the rules decider reads no prompt" in page
    assert "<h3>prompt.md</h3>" not in page and "<h3>output.txt</h3>" in page
    page = client.get(f"/beats/{read['ts']}").text
    assert "<h3>prompt.md</h3>" in page and 'id="no-prompt"' not in page


def test_an_answered_ask_keeps_its_history_on_its_page(wd: Paths, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    ask = held(wd, {"action": "run_shell", "cmd": f"echo done > {marker}"})
    q = mailbox.open_ask(open_wd(wd), prompt="Which DB?", asker="human", now=time.time())
    client, token = _logged_in(wd)
    confirm = client.get(f"/asks/{ask.id}/confirm").text
    assert f"echo done &gt; {marker}" in confirm and 'id="confirm"' in confirm
    assert not marker.exists()  # looking at the confirm step runs nothing
    csrf = security.csrf_for(token)
    r = client.post(f"/asks/{ask.id}/approve", data={"csrf": csrf}, headers={"Accept": "text/html"})
    assert r.status_code == 200 and marker.exists()  # followed to the ask's own page
    assert "the page" in r.text and "ran: exit 0" in r.text
    client.post(f"/asks/{q.id}/answer", data={"csrf": csrf, "answer": "staging"})
    page = client.get(f"/asks/{q.id}?format=json").json()
    assert page["answer"]["by"] == "page" and page["answer"]["answer"] == "staging"
    assert any("answered human-1 from the page: staging" in ln for ln in page["journal"])
    listing = client.get("/asks").text
    assert "Answered" in listing and "staging" in listing and "ran: exit 0" in listing
    gone = client.get(f"/asks/{ask.id}/confirm").text
    assert 'id="gone"' in gone and 'id="confirm"' not in gone


def test_journal_search_counts_every_match_in_the_whole_journal_and_pages(wd: Paths) -> None:
    lines = [
        f"- 2026-01-01 00:00 line {i}" + (" goal-7 moved" if i % 400 == 0 else "")
        for i in range(20000)
    ]
    wd.journal.write_text("\n".join(lines) + "\n")
    client, _ = _logged_in(wd)
    got = client.get("/journal?q=GOAL-7&format=json").json()
    assert got["total"] == 50 and len(got["lines"]) == 50  # not 5 of the newest 5,000 lines
    assert got["lines"][0].startswith("- 2026-01-01 00:00 line 19600")
    every = client.get("/journal?format=json&page=2").json()
    assert every["total"] == 20000 and every["pages"] == 100
    assert every["lines"][0] == lines[-201]
    html = client.get("/journal?q=goal-7").text
    assert "50 lines holding" in html


def test_a_thousand_goals_listed_found_and_each_with_its_page(wd: Paths) -> None:
    for i in range(1000):
        (wd.goals / f"g{i:04d}.md").write_text(f"---\npriority: {i % 3}\n---\n# Goal number {i}\n")
    client, _ = _logged_in(wd)
    got = client.get("/goals?format=json").json()
    assert got["total"] >= 1000 and got["pages"] >= 10 and len(got["goals"]) == 100
    found = client.get("/goals?q=number 777&format=json").json()
    assert [g["id"] for g in found["goals"]] == ["g0777"]
    page = client.get("/goals/g0777").text
    assert "priority" in page and "Goal number 777" in page


def test_a_sensor_page_shows_its_readings_and_charts_a_numeric_signal(wd: Paths) -> None:
    count = wd.root / "count"
    write_sensor(wd, "queue", f'n=$(cat {count}); echo "{{\\"signal\\": {{\\"depth\\": $n}}}}"')
    write_sensor(wd, "words", "echo hello")
    write_sensor(wd, "broken", "exit 3")
    for n in (3, 9, 4):
        count.write_text(str(n))
        beat(open_wd(wd), force=True)
    client, _ = _logged_in(wd)
    listing = client.get("/sensors?format=json").json()["sensors"]
    health = {s["name"]: s["health"] for s in listing}
    assert health == {"queue": "ok", "words": "ok", "broken": "failing"}
    got = client.get("/sensors/queue?format=json").json()
    assert [r["signal"]["depth"] for r in got["readings"]] == [4, 9, 3]
    assert got["series_key"] == "depth" and [v for _, v in got["series"]] == [3, 9, 4]
    assert 'id="sensor-chart"' in client.get("/sensors/queue").text
    assert 'id="sensor-chart"' not in client.get("/sensors/words").text
    assert 'id="sensor-chart"' not in client.get("/sensors/broken").text  # an exit code


def test_worker_health_tells_a_finished_worker_from_one_that_failed_or_died(wd: Paths) -> None:
    from tests.conftest import run_looop, wait_for

    for wid, script in (("ok", "exit 0"), ("bad", "exit 3"), ("slow", "sleep 30")):
        r = run_looop("-C", str(wd.root), "worker", "start", wid, "-", input=script + "\n")
        assert r.returncode == 0, r.stderr
    assert run_looop("-C", str(wd.root), "worker", "kill", "slow").returncode == 0
    client, _ = _logged_in(wd)

    def ended() -> dict[str, dict[str, object]]:
        rows = client.get("/workers?format=json").json()["workers"]
        return {w["id"]: w for w in rows if not w["alive"]}

    wait_for(lambda: len(ended()) == 3, 15, "three ended workers")
    html = client.get("/workers").text
    assert "finished ok" in html and "failed (exit 3)" in html and "died (killed)" in html
    assert ">dead<" not in html
    assert "finished ok" in client.get("/workers/ok").text


@pytest.mark.slow
def test_a_goals_page_shows_its_loops_rounds_with_maker_and_checker_results(wd: Paths) -> None:
    from tests.conftest import wait_for

    (wd.goals / "tidy.md").write_text(
        "---\nintent: tidy\nlevel: L1\ncadence: daily 03:00\nruntime: shell\n"
        'maker: |\n  "$LOOOP_BIN" done --summary made-it\n'
        'checker: |\n  "$LOOOP_BIN" done --summary checked-it\n---\n# tidy\n'
    )
    client, token = _logged_in(wd)
    started = client.post("/loops/tidy/run", data={"csrf": security.csrf_for(token)}).json()

    def finished() -> bool:
        beat(open_wd(wd), force=True)
        got = client.get("/goals/tidy?format=json").json()["rounds"]
        return bool(got) and got[0]["phase"] == "done"

    wait_for(finished, 40, "the round, stepped by beats, to finish")
    got = client.get("/goals/tidy?format=json").json()
    assert got["rounds"][0]["id"] == started["round"]
    assert "made-it" in got["rounds"][0]["maker"] and "checked-it" in got["rounds"][0]["checker"]
    page = client.get("/goals/tidy").text
    assert "made-it" in page and f'href="/rounds/{started["round"]}"' in page
    assert "checked-it" in client.get(f"/rounds/{started['round']}").text
