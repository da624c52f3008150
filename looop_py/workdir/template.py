"""`looop init`: lay out a work dir from the starter template, never overwriting."""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from looop_py.workdir import presets
from looop_py.workdir.paths import CONFIG_NAME, Paths

_SKIP = {"__init__.py", "__pycache__"}


@dataclass(frozen=True)
class InitResult:
    root: Path
    created: tuple[Path, ...]
    kept: tuple[Path, ...]  # already there, left untouched
    agent_clis: tuple[str, ...] = ()  # agent CLIs found on PATH, offered in the new looop.toml
    repo: Path | None = None  # the git repo the work dir sits in (the git sensor watches it)
    crontab: bool = False  # a crontab program is on PATH (`looop cron install` can work)
    default_runtime: str = "shell"  # the worker runtime the new looop.toml names

    def to_json(self) -> dict[str, Any]:
        return {
            "work_dir": str(self.root),
            "created": [str(p.relative_to(self.root)) for p in self.created],
            "kept": [str(p.relative_to(self.root)) for p in self.kept],
            "agent_clis": list(self.agent_clis),
            "repo": str(self.repo) if self.repo else None,
            "crontab": self.crontab,
            "default_runtime": self.default_runtime,
        }

    def runtime_note(self) -> str:
        """One line for the user: which runtime workers get, and why."""
        if self.default_runtime != "shell":
            return (
                f"workers run on {self.default_runtime} (found on PATH): [workers] default_runtime"
            )
        return (
            "no agent CLI on PATH: workers run on `shell`, which runs a prompt as bash;"
            " a model's shell worker waits for your approval"
        )


def _template_files(node: Traversable, prefix: str = "") -> list[tuple[str, bytes]]:
    files: list[tuple[str, bytes]] = []
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.name in _SKIP or child.name.endswith(".pyc"):
            continue
        rel = f"{prefix}{child.name}"
        if child.is_dir():
            files += _template_files(child, rel + "/")
        else:
            files.append((rel, child.read_bytes()))
    return files


def template_root() -> Traversable:
    """The starter work dir: inside the package once installed from a wheel
    (pyproject's package-dir maps the repo's top-level template/ there), else
    the repo's template/ itself, for a source checkout or an editable install."""
    shipped = resources.files("looop_py").joinpath("template")
    if shipped.is_dir():
        return shipped
    return Path(__file__).resolve().parents[2] / "template"


def template_files() -> list[tuple[str, bytes]]:
    """(relative path, bytes) of every starter file."""
    return _template_files(template_root())


def init(target: Path) -> InitResult:
    paths = Paths(target.resolve())
    created: list[Path] = []
    kept: list[Path] = []
    found: tuple[str, ...] = ()
    runtime: str | None = None
    paths.root.mkdir(parents=True, exist_ok=True)
    for directory in paths.layout_dirs():
        if not directory.is_dir():
            directory.mkdir(parents=True, exist_ok=True)
            created.append(directory)
    for rel, content in template_files():
        dest = paths.root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        executable = rel.startswith("sensors/") and rel.endswith(".sh")
        data = content
        if rel == CONFIG_NAME and not dest.exists():
            data, found, runtime = _with_agent_clis(content)
        try:
            # O_EXCL: an existing file, even one created a moment ago, is never replaced.
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            kept.append(dest)
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if executable:
            mode = dest.stat().st_mode
            dest.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        created.append(dest)
    if paths.config in kept:
        found = ()  # an existing looop.toml is never touched, so nothing was offered
        runtime = None
    return InitResult(
        paths.root,
        tuple(created),
        tuple(kept),
        found,
        repo=git_repo_of(paths.root),
        crontab=shutil.which("crontab") is not None,
        default_runtime=runtime or "shell",
    )


def git_repo_of(directory: Path) -> Path | None:
    """The nearest ancestor (or `directory` itself) that holds a `.git`; None outside a repo."""
    for candidate in (directory, *directory.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _with_agent_clis(template: bytes) -> tuple[bytes, tuple[str, ...], str | None]:
    """The starter looop.toml plus a commented, ready block per agent CLI on PATH, and
    `[workers] default_runtime` set to the first agent CLI that is also a worker runtime."""
    found = presets.detect()
    runtime = presets.detect_runtime()
    text = presets.apply_runtime(presets.apply(template.decode("utf-8"), found), runtime)
    return text.encode("utf-8"), tuple(p.cli for p, _ in found), runtime
