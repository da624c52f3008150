"""An answered ask keeps who answered, from where, and a journal line says so."""

from __future__ import annotations

import os
import pwd
import time
from pathlib import Path

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.workdir.paths import Paths
from tests.asks.test_mailbox import held
from tests.conftest import invoke_looop, open_wd

ME = pwd.getpwuid(os.getuid()).pw_name


def _ask(wd: Paths) -> mailbox.Ask:
    return mailbox.open_ask(open_wd(wd), prompt="Which DB?", asker="human", now=time.time())


def test_a_refused_answer_writes_no_journal_line(wd: Paths) -> None:
    ask = _ask(wd)
    assert invoke_looop("-C", str(wd.root), "answer", ask.id, "staging").returncode == 0
    again = invoke_looop("-C", str(wd.root), "answer", ask.id, "prod")
    assert again.returncode != 0
    lines = [ln for ln in wd.journal.read_text().splitlines() if ask.id in ln]
    assert len(lines) == 1 and "staging" in lines[0] and "prod" not in lines[0]


def test_a_cli_answer_is_journaled_with_where_and_who(wd: Paths) -> None:
    ask = _ask(wd)
    assert invoke_looop("-C", str(wd.root), "answer", ask.id, "use staging").returncode == 0
    record = jsonio.read_json(wd.answers / f"{ask.id}.json")
    assert (record["by"], record["who"], record["answer"]) == ("cli", ME, "use staging")
    assert f"✓ answered {ask.id} from the cli: use staging" in wd.journal.read_text()


def test_an_approval_keeps_where_it_came_from_after_its_result_is_added(
    wd: Paths, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    ask = held(wd, {"action": "run_shell", "cmd": f"touch {marker}"})
    assert invoke_looop("-C", str(wd.root), "approve", ask.id).returncode == 0
    record = jsonio.read_json(wd.answers / f"{ask.id}.json")
    assert marker.exists() and record["note"].startswith("ran")  # rewritten after it ran
    assert (record["by"], record["who"]) == ("cli", ME)
    answered_lines = [ln for ln in wd.journal.read_text().splitlines() if "answered" in ln]
    assert answered_lines == []  # an approval's line is the one saying what ran


def test_a_withdrawal_is_journaled_once(wd: Paths) -> None:
    ask = _ask(wd)
    assert invoke_looop("-C", str(wd.root), "withdraw", ask.id, "--reason", "moot").returncode == 0
    assert invoke_looop("-C", str(wd.root), "withdraw", ask.id).returncode != 0
    lines = [ln for ln in wd.journal.read_text().splitlines() if ask.id in ln]
    assert len(lines) == 1 and lines[0].endswith(f"✗ withdrew {ask.id}: moot")
