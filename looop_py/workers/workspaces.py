"""Git worktrees for workers: one per session, on branch looop/<id>.

A worktree is created when a worker starts with `--workspace git-worktree`
and disposed of when its session ends: removed (with its branch) unless it
holds commits no other branch has, or uncommitted changes to tracked files;
then it is kept and listed, and a later worker with the same id reuses it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py import procs
from looop_py.errors import WorkerRefused
from looop_py.workdir.paths import Paths

if TYPE_CHECKING:
    from looop_py.workdir.config import WorkersConfig

KINDS = ("none", "git-worktree")
_GIT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Worktree:
    repo: Path
    path: Path
    branch: str

    def to_json(self) -> dict[str, Any]:
        return {"repo": str(self.repo), "path": str(self.path), "branch": self.branch}

    @classmethod
    def from_json(cls, ws: dict[str, Any]) -> Worktree:
        """The worktree a session record names (its `workspace`); KeyError if it names none."""
        return cls(Path(ws["repo"]), Path(ws["path"]), str(ws["branch"]))


def branch_for(session_id: str) -> str:
    return f"looop/{session_id}"


def root(paths: Paths, cfg: WorkersConfig) -> Path:
    if cfg.worktree_root:
        return (paths.root / Path(cfg.worktree_root).expanduser()).resolve()
    return paths.root / ".worktrees"


def _git(args: list[str], cwd: Path) -> procs.Result:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    return procs.run(["git", *args], cwd=cwd, env=env, timeout_s=_GIT_TIMEOUT_S, cap=65536)


def _out(result: procs.Result) -> str:
    return result.stdout.decode("utf-8", "replace").strip()


def _why(result: procs.Result) -> str:
    return (result.stderr_tail or result.stdout).decode("utf-8", "replace").strip()


def repo_for(paths: Paths, cfg: WorkersConfig) -> Path:
    """The configured repo, else the git repo the work dir sits in."""
    start = (paths.root / Path(cfg.repo).expanduser()).resolve() if cfg.repo else paths.root
    if not start.is_dir():
        raise WorkerRefused(f"[workers] repo {start} is not a directory", "fix it in looop.toml")
    r = _git(["rev-parse", "--show-toplevel"], start)
    if r.exit_code != 0:
        hint = "set [workers] repo in looop.toml to the repo workers should branch from"
        raise WorkerRefused(f"{start} is not inside a git repository", hint)
    return Path(_out(r))


def create(paths: Paths, cfg: WorkersConfig, session_id: str) -> Worktree:
    """A worktree on looop/<id>; an existing one (kept from an earlier session) is reused."""
    repo = repo_for(paths, cfg)
    path = root(paths, cfg) / session_id
    branch = branch_for(session_id)
    wt = Worktree(repo, path, branch)
    if path.exists():
        head = _git(["rev-parse", "--abbrev-ref", "HEAD"], path)
        if head.exit_code == 0 and _out(head) == branch:
            return wt
        raise WorkerRefused(
            f"{path} exists but is not a worktree on {branch}",
            "move it aside, or set [workers] worktree_root to another directory",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    _git(["worktree", "prune"], repo)  # forget worktrees whose directories were deleted
    has_branch = _git(["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], repo)
    if has_branch.exit_code == 0:
        r = _git(["worktree", "add", str(path), branch], repo)
    else:
        r = _git(["worktree", "add", "-b", branch, str(path), "HEAD"], repo)
    if r.exit_code != 0:
        raise WorkerRefused(f"git worktree add failed in {repo}: {_why(r)}")
    return wt


def unique_commits(wt: Worktree) -> int:
    """Commits on the worktree's branch that no other branch (local or remote) holds."""
    r = _git(
        [
            "rev-list",
            "--count",
            f"refs/heads/{wt.branch}",
            "--not",
            f"--exclude={wt.branch}",
            "--branches",
            "--remotes",
        ],
        wt.repo,
    )
    if r.exit_code != 0:
        return 0
    try:
        return int(_out(r))
    except ValueError:
        return 0


def dispose(wt: Worktree) -> dict[str, Any]:
    """Remove the worktree and its branch, unless it holds work; says which and why."""
    commits = unique_commits(wt)
    dirty = False
    if wt.path.exists():
        st = _git(["status", "--porcelain", "--untracked-files=no"], wt.path)
        dirty = st.exit_code != 0 or bool(_out(st))
    if commits or dirty:
        reason = f"{commits} commit(s) on no other branch" if commits else "uncommitted changes"
        return {**wt.to_json(), "kept": True, "reason": reason, "commits": commits}
    if wt.path.exists():
        r = _git(["worktree", "remove", "--force", str(wt.path)], wt.repo)
        if r.exit_code != 0:
            return {**wt.to_json(), "kept": True, "reason": f"remove failed: {_why(r)}"}
    _git(["branch", "-D", wt.branch], wt.repo)
    return {**wt.to_json(), "kept": False, "commits": 0}


def kept(paths: Paths, cfg: WorkersConfig) -> list[str]:
    """Ids of the worktrees still on disk under the worktree root."""
    try:
        with os.scandir(root(paths, cfg)) as it:
            return sorted(e.name for e in it if e.is_dir() and not e.name.startswith("."))
    except FileNotFoundError:
        return []
