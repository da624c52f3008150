"""The starter work dir never wakes itself: its outputs are ignored by git, and its git
sensor does not count them even when a work dir was committed with them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from looop_py import jsonio
from looop_py.workdir.paths import Paths
from tests.conftest import invoke_looop

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True)


def _git_signal(root: Path) -> dict[str, object]:
    return jsonio.loads((root / "snapshots" / "sensor-git.json").read_text())["signal"]


def test_the_starter_gitignore_lists_every_output_looop_writes(tmp_path: Path) -> None:
    assert invoke_looop("init", str(tmp_path / "ops")).returncode == 0
    ignored = set((tmp_path / "ops" / ".gitignore").read_text().splitlines())
    p = Paths(tmp_path / "ops")
    for out in (p.snapshots, p.state, p.runs, p.sessions, p.claims, p.rounds, p.memory):
        assert f"{out.name}/" in ignored, out
    for out in (p.asks, p.answers, p.reports, p.root / "corrupt"):
        assert f"{out.name}/" in ignored, out
    assert {"journal.md", "journal.md.1", "events.jsonl*"} <= ignored
    for policy in ("looop.toml", "PLAYBOOK.md", "goals/", "sensors/"):
        assert policy not in ignored


def test_looops_own_writes_never_make_the_repo_dirty(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "code.txt").write_text("v1\n")
    ops = repo / "ops"
    assert invoke_looop("init", str(ops)).returncode == 0
    (ops / "journal.md").write_text("an old journal line\n")
    (ops / "reports").mkdir(exist_ok=True)
    (ops / "reports" / "old.md").write_text("an old report\n")
    _git(repo, "add", "-A", "-f")  # committed outputs and all, as the issue found it
    _git(repo, "commit", "-q", "-m", "work dir")
    assert invoke_looop("-C", str(ops), "pulse").returncode == 0
    assert _git_signal(ops)["dirty"] is False
    # looop writes its journal, a report, its events: the repo is still clean to the sensor.
    with (ops / "journal.md").open("a") as f:
        f.write("a new journal line\n")
    (ops / "reports" / "old.md").write_text("rewritten\n")
    invoke_looop("-C", str(ops), "pulse")
    assert _git_signal(ops)["dirty"] is False
    why = jsonio.loads(invoke_looop("-C", str(ops), "why", "--json").stdout)
    assert not [c for c in why["changed"] if c["item"] == "snap:sensor-git"]
    # A human's edit of a tracked file is what it watches for.
    (repo / "code.txt").write_text("v2\n")
    invoke_looop("-C", str(ops), "pulse")
    assert _git_signal(ops)["dirty"] is True
