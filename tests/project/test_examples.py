"""Every example in README.md and looop_py/docs/*.md runs, offline, in a temp dir.

Each page's sh blocks run in order in one bash session (so `cd` and files carry over, as
in a terminal), under `set -e`, from a temp dir holding a fresh `looop init work`; a
```text block right after a sh block is what it prints, `…` standing for what varies.
Each python block runs on its own from such a dir; each toml block is loaded as a
looop.toml. A block that cannot run here says why just above its fence:
`<!-- not run: reason -->`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from looop_py.errors import ConfigError
from looop_py.workdir import bounds
from looop_py.workdir.config import Config, build
from tests.project.docs import PAGES, ROOT, RUNNABLE, Block, blocks, every_block, matches

MARK = "\x1eblock-end\x1e"


def offline_dir(tmp: Path) -> dict[str, str]:
    """A temp dir with `work/` initialised, and the environment the examples run in: looop
    alone on PATH (no agent CLI, so the output does not depend on this machine), HOME and
    the approval key inside the temp dir, no LOOOP_* from the caller, UTC."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "looop").symlink_to(Path(sys.executable).with_name("looop"))
    (tmp / "home").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOOP_", "XDG_"))}
    env.update(
        PATH=f"{bin_dir}:/usr/bin:/bin",
        HOME=str(tmp / "home"),
        PYTHONPATH=str(ROOT),
        TZ="UTC",
        NO_PROXY="*",
        no_proxy="*",
    )
    subprocess.run(["looop", "init", "work"], cwd=tmp, env=env, check=True, capture_output=True)
    return env


def test_an_output_that_differs_is_caught() -> None:
    assert matches("took … ms\nok\n", "took 12.5 ms\nok")
    assert not matches("took … ms\nok\n", "took 12.5 ms\nfailed")
    assert not matches("ok\n", "ok\nand more\n")
    assert not matches("✓ started worker …\n", "✗ failed: …")


def test_a_text_block_after_a_sh_block_is_its_output(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "```sh\necho hi\n```\n\n```text\nhi\n```\n"
        "<!-- not run: needs gh -->\n```sh\ngh pr list\n```\n\nprose\n\n```text\nlone\n```\n"
    )
    got = blocks(page)
    assert [(b.lang, b.output, b.not_run) for b in got] == [
        ("sh", "hi\n", None),
        ("sh", None, "needs gh"),
        ("text", None, None),
    ]


def test_every_page_has_examples_and_few_are_not_run() -> None:
    runnable = [b for b in every_block() if b.lang in RUNNABLE]
    skipped = [b for b in runnable if b.not_run]
    assert len(runnable) >= 20, "the examples went missing"
    assert len(skipped) <= len(runnable) // 3, [b.where for b in skipped]
    assert all(b.not_run and b.not_run.strip() for b in skipped)
    readme = [b for b in blocks(ROOT / "README.md") if b.lang == "sh" and b.output]
    assert len(readme) >= 5, "the README's tour lost its outputs"


def _shell(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in ("sh", "bash") and not b.not_run]


def run_session(shell: list[Block], tmp: Path) -> tuple[Block | None, list[str], str]:
    """Run the blocks in one bash session: the block that failed (None: all ran), what each
    printed, and the tail of stdout and stderr (to say why)."""
    script = "set -e\n" + "".join(f"{b.body}printf '\\n{MARK}\\n'\n" for b in shell)
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp,
        env=offline_dir(tmp),
        capture_output=True,
        text=True,
        timeout=170,
    )
    outputs = [out.lstrip("\n") for out in done.stdout.split(f"\n{MARK}\n")]
    ran = len(outputs) - 1
    if done.returncode != 0 and ran >= len(shell):  # every marker printed, then bash failed
        raise AssertionError(f"exit {done.returncode} after every block: {done.stderr}")
    failed = shell[ran] if done.returncode != 0 else None
    return failed, outputs[:ran], f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


def test_a_failing_block_is_named_and_stops_the_session(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("```sh\necho one\n```\n\n```sh\nls no-such-file\necho two\n```\n")
    (tmp_path / "run").mkdir()
    failed, outputs, why = run_session(_shell(page), tmp_path / "run")
    assert failed is not None and failed.line == 5
    assert outputs == ["one\n"] and "two" not in why and "no-such-file" in why


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("page", [p for p in PAGES if _shell(p)], ids=lambda p: p.name)
def test_the_shell_examples_run(page: Path, tmp_path: Path) -> None:
    shell = _shell(page)
    failed, outputs, why = run_session(shell, tmp_path)
    assert failed is None, f"{failed.where} failed:\n{failed.body}\n{why}"
    for block, out in zip(shell, outputs, strict=True):
        if block.output is not None:
            assert matches(block.output, out), (
                f"{block.where} printed:\n{out}\nthe page says:\n{block.output}"
            )


PYTHON = [b for b in every_block() if b.lang == "python" and not b.not_run]


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.where)
def test_the_python_examples_run(block: Block, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", block.body],
        cwd=tmp_path,
        env=offline_dir(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{block.where}:\n{block.body}\n{done.stderr}"


TOML = [b for b in every_block() if b.lang == "toml" and not b.not_run]


def load(text: str) -> Config:
    config: Config = build(Config, tomllib.loads(text), where="")
    bounds.check(config)
    return config


def test_a_bad_toml_example_is_caught() -> None:
    with pytest.raises(ConfigError):
        load("[sensors]\ntimeout_s = 0\n")
    with pytest.raises(ConfigError):
        load("[decider]\nbakend = 'rules'\n")


@pytest.mark.parametrize("block", TOML, ids=lambda b: b.where)
def test_the_toml_examples_are_valid_config(block: Block) -> None:
    try:
        load(block.body)
    except ConfigError as exc:
        pytest.fail(f"{block.where}: {exc.message}\n{block.body}")
