"""A loop whose round waits on a human says so in every view: held since T, on ask X."""

from __future__ import annotations

from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop, open_wd
from tests.loops.test_e2e import DONE, beat_until, loop_goal, rounds_of, setup


def held_loop(wd: Paths) -> mailbox.Ask:
    setup(wd)
    loop_goal(
        wd, "sweep", "L2-assisted", f'{DONE} "patched"', f'{DONE} "green"', action="apply-patch"
    )
    beat_until(wd, lambda: any(r["phase"] == "awaiting-approval" for r in rounds_of(wd)))
    (ask,) = [a for a in mailbox.pending(open_wd(wd)) if a.kind == "approval"]
    return ask


def test_a_held_loop_says_why_in_loops_status_and_the_page(wd: Paths) -> None:
    ask = held_loop(wd)
    root = ("-C", str(wd.root))
    why = f"waiting on ask {ask.id}"
    listed = invoke_looop(*root, "loops")
    assert "held since " in listed.stdout and why in listed.stdout, listed.stdout
    (lp,) = jsonio.loads(invoke_looop(*root, "loops", "--json").stdout)["loops"]
    assert lp["waiting"].startswith("held since ") and lp["waiting"].endswith(why)
    status = invoke_looop(*root, "status")
    assert "loop held   sweep: held since " in status.stdout and why in status.stdout
    as_json = jsonio.loads(invoke_looop(*root, "status", "--json").stdout)
    assert as_json["held_loops"]["sweep"] == lp["waiting"]
    pytest.importorskip("starlette")
    from tests.web.test_web import _logged_in

    client, _ = _logged_in(wd)
    assert lp["waiting"] in client.get("/loops").text
    # answered, it is held no more
    assert invoke_looop(*root, "deny", ask.id).returncode == 0
    (lp,) = jsonio.loads(invoke_looop(*root, "loops", "--json").stdout)["loops"]
    assert lp["waiting"] is None
    assert "loop held" not in invoke_looop(*root, "status").stdout


def test_approving_what_its_checker_rejected_takes_unverified_and_the_ask_says_so(
    wd: Paths, tmp_path: Path
) -> None:
    marker = tmp_path / "applied"
    setup(wd, f'[actions.apply-patch]\ncommand = "touch {marker}"\n')
    rejects = '"$LOOOP_BIN" done --status blocked --summary "the tests fail"'
    loop_goal(wd, "sweep", "L2", f'{DONE} "patched"', rejects, action="apply-patch")
    beat_until(wd, lambda: any(r["phase"] == "awaiting-approval" for r in rounds_of(wd)))
    (ask,) = [a for a in mailbox.pending(open_wd(wd)) if a.kind == "approval"]
    assert "NOT verified" in ask.prompt and "--unverified" in ask.prompt
    root = ("-C", str(wd.root))
    once = invoke_looop(*root, "approve", ask.id)
    assert once.returncode == 2 and f"looop approve {ask.id} --unverified" in once.stderr
    assert not marker.exists() and mailbox.pending(open_wd(wd))  # still waiting, nothing ran
    twice = invoke_looop(*root, "approve", ask.id, "--unverified")
    assert twice.returncode == 0, twice.stderr
    assert marker.exists()
    (done,) = rounds_of(wd)
    assert done["outcome"] == "proceeded"


def test_a_held_loop_is_notified_once_and_not_again_after_the_answer(
    wd: Paths, tmp_path: Path
) -> None:
    from looop_py.beat.pulse import beat

    ask = held_loop(wd)
    log = tmp_path / "hook.log"
    cfg = wd.config.read_text()
    wd.config.write_text(cfg + f"\n[notify]\ncommand = '''cat >> {log}; echo >> {log}'''\n")
    for _ in range(3):
        beat(open_wd(wd), force=True)
    events = [jsonio.loads(line) for line in log.read_text().splitlines() if line.strip()]
    held = [e for e in events if e["kind"] == "loop-held"]
    assert len(held) == 1, events
    (e,) = held
    assert e["loop"] == "sweep" and e["id"] == ask.id
    assert e["text"].startswith("looop: loop sweep held since ")
    assert f"waiting on ask {ask.id}" in e["text"] and f"looop approve {ask.id}" in e["text"]
    denied = invoke_looop("-C", str(wd.root), "deny", ask.id, "--reason", "not now")
    assert denied.returncode == 0, denied.stderr
    before = len(log.read_text().splitlines())
    for _ in range(2):
        beat(open_wd(wd), force=True)
    after = [jsonio.loads(x) for x in log.read_text().splitlines()[before:] if x.strip()]
    assert not [x for x in after if x["kind"] == "loop-held"]
