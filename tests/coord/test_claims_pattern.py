"""The claim pattern in docs/coordination.md, run verbatim from a script, never double-grants."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from looop_py.workdir.paths import Paths

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 5


def readme_pattern() -> str:
    """The shell block of the coordination page's Claims section, verbatim."""
    page = ROOT / "looop_py" / "docs" / "coordination.md"
    section = page.read_text().split("## Claims", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1)


def _round_script(tmp: Path, pattern: str, shell: str) -> Path:
    """One round: the pattern, with a critical section where the README says `… work …`."""
    critical = (
        f'mkdir "{tmp}/inside" 2>/dev/null || echo "DOUBLE $$ $epoch" >> "{tmp}/ledger"\n'
        f'echo "grant $epoch" >> "{tmp}/ledger"\n'
        "sleep 0.3\n"
        f'rmdir "{tmp}/inside"\n'
    )
    lines = pattern.splitlines(keepends=True)
    work = next(i for i, line in enumerate(lines) if line.lstrip().startswith("# …"))
    body = "".join([*lines[: work + 1], critical, *lines[work + 1 :]])
    script = tmp / f"round-{shell}.sh"
    script.write_text(f"#!/bin/{shell}\n{body}")
    script.chmod(0o755)
    return script


def _contend(wd: Paths, tmp: Path, script: Path) -> list[str]:
    looop = tmp / "looop"
    looop.write_text(f'#!/bin/sh\nexec {sys.executable} -m looop_py "$@"\n')
    looop.chmod(0o755)
    env = {**os.environ, "LOOOP_BIN": str(looop), "LOOOP_DIR": str(wd.root)}
    env.pop("LOOOP_SESSION_ID", None)
    runner = f'for i in $(seq {ROUNDS}); do "{script}"; sleep 0.05; done'
    procs = [subprocess.Popen(["bash", "-c", runner], env=env, cwd=wd.root) for _ in range(2)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    return (tmp / "ledger").read_text().splitlines() if (tmp / "ledger").exists() else []


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "variant",
    ["exact", "stderr-redirect", "dash"],
)
def test_the_readme_claim_pattern_never_double_grants(
    wd: Paths, tmp_path: Path, variant: str
) -> None:
    pattern = readme_pattern()
    assert 'epoch=$("$LOOOP_BIN" claim repo-main) || exit 0' in pattern
    shell = "bash"
    if variant == "stderr-redirect":  # no exec shortcut: `$( )` keeps a subshell alive
        pattern = pattern.replace("claim repo-main)", "claim repo-main 2>/dev/null)")
    if variant == "dash":
        shell = "sh"
    ledger = _contend(wd, tmp_path, _round_script(tmp_path, pattern, shell))
    assert not [line for line in ledger if line.startswith("DOUBLE")], ledger
    grants = [int(line.split()[1]) for line in ledger if line.startswith("grant")]
    assert grants and len(set(grants)) == len(grants)  # every grant a new epoch
    assert grants == sorted(grants)  # epochs only grow
