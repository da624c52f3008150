"""The script backend: replayed moves, a durable cursor, exhaustion, races."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.deciders.base import DecideError, Decision, Usage, request_in
from looop_py.deciders.script import ScriptDecider
from looop_py.errors import ConfigError
from looop_py.workdir.config import DeciderConfig
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop


def moves(n: int) -> list[dict[str, object]]:
    return [{"action": "noop", "reason": f"step {i}"} for i in range(n)]


def decider(script: str = "moves.jsonl") -> ScriptDecider:
    return ScriptDecider(DeciderConfig(backend="script", script=script))


def ask(d: ScriptDecider, wd: Paths) -> Decision:
    return d.decide(request_in(wd, 0.0))


def test_each_decide_takes_the_next_move_across_instances_then_noops(wd: Paths) -> None:
    (wd.root / "moves.jsonl").write_text(
        "# a demo script\n\n" + "\n".join(json.dumps(m) for m in moves(3)) + "\n"
    )
    first, second = decider(), decider()
    assert ask(first, wd).move == moves(3)[0]
    assert ask(second, wd).move == moves(3)[1]  # a new instance (a restart) continues
    last = ask(first, wd)
    assert last.move == moves(3)[2] and last.meta == {"backend": "script", "index": 2, "of": 3}
    assert last.usage == Usage(0, 0, 0.0)
    done = ask(decider(), wd)
    assert done.move["action"] == "noop" and "exhausted" in done.move["reason"]
    cursor = jsonio.read_json(wd.state / "script-cursor.json")
    assert cursor["next"] == 3 and cursor["script"] == "moves.jsonl"  # work-dir relative


def test_a_copied_or_moved_work_dir_keeps_its_place_in_the_script(
    wd: Paths, tmp_path: Path
) -> None:
    import shutil

    (wd.root / "moves.jsonl").write_text("\n".join(json.dumps(m) for m in moves(3)) + "\n")
    assert ask(decider(), wd).move == moves(3)[0]
    copy = Paths(tmp_path / "copy")
    shutil.copytree(wd.root, copy.root)
    assert ask(decider(), copy).move == moves(3)[1]  # not replayed from the start
    moved = Paths(tmp_path / "moved")
    wd.root.rename(moved.root)
    assert ask(decider(), moved).move == moves(3)[1]


def test_a_script_outside_the_work_dir_is_keyed_by_its_absolute_path(
    wd: Paths, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(json.dumps({"action": "noop"}) + "\n")
    assert ask(decider(str(outside)), wd).move == {"action": "noop"}
    cursor = jsonio.read_json(wd.state / "script-cursor.json")
    assert cursor["script"] == str(outside.resolve())


def test_a_json_array_and_usage_wrappers(wd: Paths) -> None:
    entries = [
        {"move": {"action": "noop"}, "usage": {"input_tokens": 900, "output_tokens": 12}},
        {
            "move": {"action": "noop"},
            "usage": {"input_tokens": 5, "output_tokens": 1, "cost_usd": 0.5},
        },
        {"move": {"action": "noop"}, "usage": None},
    ]
    (wd.root / "moves.json").write_text(json.dumps(entries, indent=2))
    d = decider("moves.json")
    assert ask(d, wd).usage == Usage(900, 12, None)
    assert ask(d, wd).usage == Usage(5, 1, 0.5)
    third = ask(d, wd)
    assert third.move == {"action": "noop"} and third.usage is None  # replays an unmetered run


def test_hostile_entries_are_returned_for_the_pulse_to_judge_or_rejected(wd: Paths) -> None:
    (wd.root / "moves.jsonl").write_bytes(
        b'{"action": "run_shell", "cmd": "rm -rf /"}\n'
        b'{"action": "noop"} {"action": "noop"}\n'
        b'{"action": "noop", "reason": "\xff"}\n'
        b'{"action": "noop"}\n'
    )
    d = decider()
    assert ask(d, wd).move == {"action": "run_shell", "cmd": "rm -rf /"}  # not validated here
    with pytest.raises(DecideError, match="more than one") as info:
        ask(d, wd)
    assert info.value.raw == '{"action": "noop"} {"action": "noop"}'
    with pytest.raises(DecideError, match="not UTF-8"):
        ask(d, wd)
    assert ask(d, wd).move == {"action": "noop"}  # a bad entry is skipped, not retried forever


def test_pointing_at_another_script_starts_it_from_the_top(wd: Paths) -> None:
    for name in ("a.jsonl", "b.jsonl"):
        (wd.root / name).write_text("\n".join(json.dumps(m) for m in moves(2)))
    ask(decider("a.jsonl"), wd)
    assert ask(decider("b.jsonl"), wd).move == moves(2)[0]


def test_racing_deciders_never_replay_an_entry_twice(wd: Paths) -> None:
    (wd.root / "moves.jsonl").write_text("\n".join(json.dumps(m) for m in moves(40)))
    seen: list[str] = []

    def worker() -> None:
        for _ in range(5):
            seen.append(ask(decider(), wd).move["reason"])

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == sorted(f"step {i}" for i in range(40))


def test_errors_name_the_problem(wd: Paths, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a script"):
        ScriptDecider(DeciderConfig(backend="script"))
    with pytest.raises(DecideError, match="cannot read the script"):
        ask(decider("missing.jsonl"), wd)
    (wd.root / "bad.json").write_text("[1, 2")
    with pytest.raises(DecideError, match="not a valid JSON array"):
        ask(decider("bad.json"), wd)


def test_script_backend_end_to_end_through_looop_pulse(wd: Paths) -> None:
    (wd.root / "moves.jsonl").write_text(
        json.dumps({"action": "noop", "reason": "first", "journal": "scripted one"})
        + "\n"
        + json.dumps({"action": "noop", "reason": "second"})
        + "\n"
    )
    wd.config.write_text('[decider]\nbackend = "script"\nscript = "moves.jsonl"\n')
    reasons = []
    for _ in range(3):
        r = invoke_looop("-C", str(wd.root), "pulse", "--force", "--json")
        assert r.returncode == 0, r.stderr
        reasons.append(json.loads(r.stdout)["move"]["reason"])
    assert reasons[:2] == ["first", "second"] and "exhausted" in reasons[2]
    assert "scripted one" in wd.journal.read_text()
