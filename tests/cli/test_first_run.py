"""From `looop init` to a working loop, as a new user sees it: every line says what happened."""

from __future__ import annotations

from pathlib import Path

from looop_py import jsonio
from tests.conftest import invoke_looop, wait_for


def test_init_then_two_pulses_explain_themselves(tmp_path: Path) -> None:
    root = tmp_path / "ops"
    init = invoke_looop("init", str(root))
    assert init.returncode == 0, init.stderr
    steps = [line for line in init.stdout.splitlines() if line.startswith("  ") and ". " in line]
    assert [s.split(".", 1)[0].strip() for s in steps] == ["1", "2", "3"]
    assert f"looop -C {root} pulse" in steps[0] and "git sensor" in steps[0]
    assert "decider" in steps[1]
    assert "cron" in steps[2]

    first = invoke_looop("-C", str(root), "pulse")
    assert first.returncode == 0, first.stderr
    line = first.stdout.strip()
    assert line.startswith("✓ started worker welcome ("), line
    assert "goal welcome appeared" in line
    assert line.endswith("→ follow: looop worker logs welcome -f")

    def ended() -> bool:
        view = jsonio.loads(invoke_looop("-C", str(root), "workers", "--all", "--json").stdout)
        return any(w["id"] == "welcome" and not w["alive"] for w in view["workers"])

    wait_for(ended, timeout=20, what="the welcome worker to end")
    status = root / "sessions" / "welcome" / "status.json"  # its supervisor records the end
    wait_for(lambda: jsonio.read_json(status).get("ended_at"), 5, "the welcome worker's status")
    second = invoke_looop("-C", str(root), "pulse")
    assert second.returncode == 0, second.stderr
    line = second.stdout.strip()
    assert line.startswith("✓ nothing to do"), line
    assert "worker welcome exited 0" in line
    assert (root / "reports" / "status.md").is_file()

    third = invoke_looop("-C", str(root), "pulse")
    assert third.stdout == ""  # nothing happened, and stdout is not a terminal: cron stays quiet
    why = invoke_looop("-C", str(root), "why")
    assert "no decider was called" in why.stdout
