"""What looop writes and prints keeps its shape: the work dir's layout, every JSON record's
keys, each event's fields and each `--json` answer's keys, pinned in formats.json.

One scripted day through the real CLI (a question, a goal, a timer, a shell worker held
for approval, approved and run, a claim, answers) leaves a work dir; its shape is compared
with the pinned one. A refactor that moves code must leave this test alone; a change to a
format must change formats.json in the same commit, on purpose.

The scenario needs nothing but the standard library and a `looop` command, so the pinned
shape can be made by any checkout's looop (to show a refactor changed nothing):

    python tests/project/test_formats.py LOOOP_COMMAND... > tests/project/formats.json
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PINNED = Path(__file__).with_name("formats.json")

CONFIG = """\
[decider]
backend = "script"
script = "moves.jsonl"
"""

MOVES = [
    {"action": "ask_human", "prompt": "Ship the release today?", "options": ["yes", "no"]},
    {"action": "write_goal", "id": "tidy", "body": "# Tidy\n\nKeep the docs current.\n"},
    {"action": "write_schedule", "name": "nightly", "every_s": 3600},
    {"action": "start_worker", "id": "w1", "prompt": "echo done", "runtime": "shell"},
]

# Path segments that carry a time or a process id: one placeholder each.
VOLATILE = [
    (re.compile(r"^\d{8}-\d{6}\.\d{9}-\d+$"), "<run>"),
    (re.compile(r"^\.?[\w.-]*\.(tmp|lock)$"), "<lock>"),
]
SKIP_DIRS = {"__pycache__"}


def scenario(looop: list[str], root: Path) -> dict[str, Any]:
    """Run the scripted day in `root` with `looop`; the shape of what it left and printed."""

    def run(*args: str, ok: tuple[int, ...] = (0,)) -> str:
        done = subprocess.run(
            [*looop, "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if k != "LOOOP_DIR"},
        )
        assert done.returncode in ok, (args, done.returncode, done.stdout, done.stderr)
        return done.stdout

    subprocess.run([*looop, "init", str(root)], check=True, capture_output=True)
    for starter in [*(root / "sensors").glob("*.sh"), *(root / "goals").glob("*.md")]:
        starter.unlink()
    (root / "looop.toml").write_text(CONFIG)
    (root / "moves.jsonl").write_text("".join(json.dumps(m) + "\n" for m in MOVES))
    sensor = root / "sensors" / "disk.sh"
    sensor.write_text('#!/bin/sh\necho \'{"signal": "ok", "detail": {"free_gb": 12}}\'\n')
    sensor.chmod(0o755)

    for _ in MOVES:
        run("pulse", "--force", ok=(0, 1))
    asks = json.loads(run("asks", "--json"))
    question = next(a for a in asks["asks"] if a["kind"] == "question")
    approval = next(a for a in asks["asks"] if a["kind"] == "approval")
    run("answer", question["id"], "yes")
    run("approve", approval["id"], ok=(0, 1))
    status, deadline = root / "sessions" / "w1" / "status.json", time.monotonic() + 30
    while not (status.exists() and "exit_code" in status.read_text(errors="replace")):
        assert time.monotonic() < deadline, "the worker did not end"
        time.sleep(0.05)
    run("claim", "docs", "--session", "human", "--json")
    run("pulse", "--force", ok=(0, 1))

    printed = {
        " ".join(args): keys(json.loads(run(*args, "--json", ok=(0, 1, 3))))
        for args in (
            ("status",),
            ("why",),
            ("asks",),
            ("workers", "--all"),
            ("claims",),
            ("loops",),
            ("rounds",),
            ("schedules",),
            ("sense",),
            ("journal",),
        )
    }
    return {"files": files(root), "events": events(root), "printed": printed}


# Keys whose members depend on how fast the machine ran the scenario: records-checked.json
# notes a folder once it is older than its settle time, which a loaded machine reaches
# within the scenario and an idle one does not.
TIMED = {"dirs"}


def keys(value: Any, prefix: str = "") -> list[str]:
    """Every key path in `value` (list items merged under `[]`), sorted."""
    found: set[str] = set()
    if prefix in TIMED:
        return []
    if isinstance(value, dict):
        named = prefix.endswith(("snapshots", "sensors", "by_source", "past", "charged"))
        for k, v in value.items():
            name = "<name>" if named else k  # keyed by a sensor, a source or a day: they vary
            path = f"{prefix}.{name}" if prefix else str(name)
            found.add(path)
            found.update(keys(v, path))
    elif isinstance(value, list):
        for item in value:
            found.update(keys(item, f"{prefix}[]"))
    return sorted(found)


def files(root: Path) -> dict[str, list[str] | None]:
    """Each file under `root` (volatile names as placeholders): its JSON keys, or None."""
    shape: dict[str, list[str] | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir() or SKIP_DIRS & set(rel.parts):
            continue
        parts = [
            next((shown for pattern, shown in VOLATILE if pattern.match(part)), part)
            for part in rel.parts
        ]
        name = "/".join(parts)
        try:
            value = json.loads(path.read_text()) if path.suffix == ".json" else None
        except ValueError:
            value = None
        shape[name] = keys(value) if isinstance(value, dict | list) else None
    return shape


def events(root: Path) -> dict[str, list[str]]:
    """Each event name in events.jsonl with every field it was written with."""
    seen: dict[str, set[str]] = {}
    for line in (root / "events.jsonl").read_text().splitlines():
        record = json.loads(line)
        seen.setdefault(record["event"], set()).update(keys(record))
    return {name: sorted(fields) for name, fields in sorted(seen.items())}


def test_formats_are_the_pinned_ones(tmp_path: Path) -> None:
    looop = [sys.executable, "-m", "looop_py"]
    got = scenario(looop, tmp_path / "wd")
    pinned = json.loads(PINNED.read_text())
    for part in ("files", "events", "printed"):
        assert got[part] == pinned[part], f"{part} changed: {json.dumps(got[part], indent=1)}"


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(scenario(sys.argv[1:], Path(tmp) / "wd"), indent=1, sort_keys=True))
