"""Every wake is explained, from the user's side: `looop why` (and --json) names what woke the
beat, a timer or the noop TTL included, and the pulse line names the key that changed."""

from __future__ import annotations

import json
import time

from looop_py import jsonio
from looop_py.beat.pulse import beat
from looop_py.cli.summary import beat_line
from looop_py.schedules import timers
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd, write_sensor


def _scripted(wd: Paths, *moves: dict[str, object]) -> None:
    """The script decider: the moves in turn, then noop (a real backend, no model)."""
    (wd.root / "moves.jsonl").write_text("".join(json.dumps(m) + "\n" for m in moves))
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.jsonl"\n')


def _why(wd: Paths) -> dict[str, object]:
    return jsonio.loads(invoke_looop("-C", str(wd.root), "why", "--json").stdout)


def test_a_wake_by_the_deciders_timer_is_named(wd: Paths) -> None:
    _scripted(wd, {"action": "noop", "next_interval_s": 30})
    t0 = time.time()
    beat(open_wd(wd, clock=lambda: t0))
    assert beat(open_wd(wd, clock=lambda: t0 + 10)).outcome == "skipped"
    woke = beat(open_wd(wd, clock=lambda: t0 + 31))
    assert woke.outcome == "decided"
    assert "(the decider's timer came due;" in beat_line(woke)  # the pulse line too
    why = _why(wd)
    assert why["forced_by"] == "next-interval" and why["changed"] == []
    assert "the decider's timer came due" in str(why["explanation"])
    plain = invoke_looop("-C", str(wd.root), "why").stdout
    assert "timer came due" in plain and "0 item(s)" not in plain


def test_a_wake_by_the_noop_ttl_is_named(wd: Paths) -> None:
    _scripted(wd)
    t0 = time.time()
    beat(open_wd(wd, clock=lambda: t0))
    late = beat(open_wd(wd, clock=lambda: t0 + 6 * 3600 + 1))
    assert late.forced_by == "noop-ttl"
    why = _why(wd)
    assert why["forced_by"] == "noop-ttl"
    assert "noop_ttl_s passed" in str(why["explanation"])
    assert "0 item(s)" not in invoke_looop("-C", str(wd.root), "why").stdout


def test_a_change_and_a_forced_beat_say_so(wd: Paths) -> None:
    _scripted(wd)
    write_sensor(wd, "probe", "echo one")
    invoke_looop("-C", str(wd.root), "pulse")
    why = _why(wd)
    assert why["forced_by"] is None and "item(s) changed" in str(why["explanation"])
    invoke_looop("-C", str(wd.root), "pulse", "--force")
    forced = _why(wd)
    assert forced["forced_by"] == "force" and "forced with --force" in str(forced["explanation"])


def test_a_timer_coming_due_is_named_in_the_pulse_line(wd: Paths) -> None:
    _scripted(wd)
    t0 = time.time()
    timers.write(open_wd(wd), "nightly", now=t0, in_s=60)
    beat(open_wd(wd, clock=lambda: t0 + 1))
    due = beat(open_wd(wd, clock=lambda: t0 + 61))
    assert due.outcome == "decided"
    assert "timer nightly came due" in beat_line(due)
    changed = _why(wd)["changed"]
    assert isinstance(changed, list)
    assert any(c["item"] == "snap:sys-schedules" for c in changed)


def test_the_pulse_line_names_the_key_that_changed(wd: Paths) -> None:
    _scripted(wd)
    flag = wd.root / "dirty"
    flag.write_text("false")
    long_dir = "/a/long/path/" + "x" * 40
    write_sensor(
        wd,
        "git",
        f'printf \'{{"signal":{{"branch":"master","dir":"{long_dir}","dirty":%s}}}}\' '
        f'"$(cat {flag})"',
    )
    invoke_looop("-C", str(wd.root), "pulse")
    flag.write_text("true")
    r = invoke_looop("-C", str(wd.root), "pulse")
    assert r.returncode == 0, r.stderr
    assert "git: dirty false → true" in r.stdout, r.stdout
    assert "master" not in r.stdout  # unchanged keys are not shown
