from __future__ import annotations

import time

from looop_py import jsonio
from looop_py.coord.holders import own_holder
from looop_py.sensing.probes import Seen, claims, goals, run_probes, sessions
from looop_py.workdir.goals import read_goals
from looop_py.workdir.paths import Paths
from tests.conftest import open_wd


def seen(wd: Paths, now: float) -> Seen:
    return Seen(open_wd(wd), now, tuple(g.id for g in read_goals(open_wd(wd))))


def test_empty_states(wd: Paths) -> None:
    now = time.time()
    assert sessions(seen(wd, now)) == {"signal": [], "detail": {"count": 0}}
    assert claims(seen(wd, now)) == {"signal": [], "detail": {"count": 0}}
    g = goals(seen(wd, now))
    assert g["signal"] == {} and g["detail"]["goals"]["welcome"] == {"last_acted": None}


def test_sessions_and_claims_are_sorted_and_carry_only_wake_fields(wd: Paths) -> None:
    for sid, state, rc in (("b-worker", "exited", 0), ("a-worker", "running", None)):
        (wd.sessions / sid).mkdir()
        jsonio.write_json(
            wd.sessions / sid / "status.json", {"state": state, "exit_code": rc, "ended_at": 123.0}
        )
    # a-worker's record names a live process (this one), so it is running and busy.
    me = own_holder()
    jsonio.write_json(
        wd.sessions / "a-worker" / "meta.json",
        {"id": "a-worker", "pid": me.pid, "create_time": me.create_time, "started_at": time.time()},
    )
    jsonio.write_json(wd.claims / "repo.json", {"name": "repo", "session": "a-worker", "epoch": 3})
    jsonio.write_json(wd.claims / "docs.json", {"name": "docs", "session": "b-worker"})
    s = sessions(seen(wd, time.time()))
    assert s["signal"] == [
        {"id": "a-worker", "state": "running", "exit_code": None, "health": "busy"},
        {"id": "b-worker", "state": "exited", "exit_code": 0, "health": "dead"},
    ]
    assert s["detail"]["live"] == 1 and s["detail"]["workers"]["a-worker"]["pid"] == me.pid
    assert claims(seen(wd, time.time()))["signal"] == [
        {"name": "docs", "session": "b-worker"},
        {"name": "repo", "session": "a-worker"},
    ]


def test_goal_ages_live_in_detail_only(wd: Paths) -> None:
    now = 1_000_000.0
    jsonio.write_json(wd.goal_activity, {"goals": {"welcome": now - 90}})
    g = goals(seen(wd, now))
    assert g["signal"] == {}
    assert g["detail"]["goals"]["welcome"] == {"last_acted": now - 90}
    assert goals(seen(wd, now + 60)) == g  # no age in the snapshot: nothing to rewrite


def test_live_workers_and_pending_asks_hold_still_between_beats(wd: Paths) -> None:
    """No ages in sys-sessions or sys-asks: an idle worker and an unanswered ask leave
    both snapshots byte for byte as they were, so they are never rewritten."""
    from looop_py.asks import mailbox
    from looop_py.sensing.probes import asks

    me = own_holder()
    (wd.sessions / "w").mkdir()
    jsonio.write_json(wd.sessions / "w" / "status.json", {"state": "running"})
    jsonio.write_json(
        wd.sessions / "w" / "meta.json",
        {"id": "w", "pid": me.pid, "create_time": me.create_time, "started_at": time.time() - 5},
    )
    mailbox.open_ask(open_wd(wd), prompt="which branch?", asker="w", now=time.time())
    now = time.time()
    first = (sessions(seen(wd, now)), asks(seen(wd, now)))
    later = (sessions(seen(wd, now + 120)), asks(seen(wd, now + 120)))
    assert jsonio.canonical(first) == jsonio.canonical(later)
    row = first[0]["detail"]["workers"]["w"]
    assert row["started_at"] is not None and "idle_s" not in row and "uptime_s" not in row


def test_corrupt_files_do_not_break_probes(wd: Paths) -> None:
    (wd.claims / "torn.json").write_text("{")
    (wd.sessions / "x").mkdir()
    (wd.sessions / "x" / "status.json").write_text("nope")
    wd.goal_activity.write_text("[")
    out = dict(run_probes(open_wd(wd), time.time(), goals=read_goals(open_wd(wd)))[0])
    assert out["sys-claims"]["signal"] == [{"name": "torn", "session": None}]
    assert out["sys-sessions"]["signal"][0]["state"] == "unreadable"
    assert out["sys-goals"]["signal"] == {}


def test_probes_hand_their_findings_on_typed(wd: Paths) -> None:
    from looop_py.asks import mailbox

    me = own_holder()
    (wd.sessions / "w1").mkdir()
    jsonio.write_json(wd.sessions / "w1" / "status.json", {"state": "running", "exit_code": None})
    jsonio.write_json(
        wd.sessions / "w1" / "meta.json",
        {"id": "w1", "pid": me.pid, "create_time": me.create_time, "started_at": time.time()},
    )
    (wd.sessions / "w2").mkdir()
    jsonio.write_json(wd.sessions / "w2" / "status.json", {"state": "exited", "exit_code": 0})
    ask = mailbox.open_ask(open_wd(wd), prompt="Deploy?", asker="w1", now=time.time())
    jsonio.write_json(wd.goal_activity, {"goals": {"welcome": 123.0}})
    _, found = run_probes(open_wd(wd), time.time(), goals=read_goals(open_wd(wd)))
    assert found.live_workers == {"w1"} and {v.id for v in found.sessions} == {"w1", "w2"}
    assert [a.id for a in found.asks] == [ask.id]
    assert found.last_acted == {"welcome": 123.0}


def test_the_prompt_shows_goal_ages_computed_when_shown() -> None:
    from looop_py.beat.decide import _with_goal_ages

    snaps = {"sys-goals": {"signal": {}, "detail": {"goals": {"a": {"last_acted": 10.0}}}}}
    shown = _with_goal_ages(snaps, {"a": 90})
    assert shown["sys-goals"]["detail"]["goals"]["a"] == {"last_acted": 10.0, "age_s": 90}
    assert snaps["sys-goals"]["detail"]["goals"]["a"] == {"last_acted": 10.0}  # not mutated
    assert _with_goal_ages({"x": {}}, {}) == {"x": {}}
