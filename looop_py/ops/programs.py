"""`looop doctor`'s checks of the programs looop starts: the decider's command and each
runtime's, found where the cron job will look (its PATH), with the files they name."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

from looop_py.errors import LooopError
from looop_py.ops.check import Check, Verdict
from looop_py.workdir.config import Config

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")


def command_words(command: str) -> list[str]:
    """A command line's words from its program on, past leading `NAME=value` assignments
    (aider's preset starts with one). ValueError when the line does not parse."""
    words = shlex.split(command)
    while words and _ASSIGNMENT.fullmatch(words[0]):
        words = words[1:]
    return words


def _where(job_path: str | None) -> str:
    return "the cron job's PATH (state/cron.env)" if job_path is not None else "PATH"


def decider_program(cfg: Config, job_path: str | None) -> Check:
    """A command decider's program, found where the job will look for it."""
    if cfg.decider.backend != "command":
        return Check("decider program", Verdict.OK, f"{cfg.decider.backend}: none to find")
    try:
        program = (command_words(cfg.decider.command) or [""])[0]
    except ValueError as exc:
        return Check("decider program", Verdict.FAIL, f"its command does not parse: {exc}")
    found = shutil.which(program, path=job_path) if program else None
    if found is None:
        return Check(
            "decider program",
            Verdict.FAIL,
            f"`{program or '?'}` is not on {_where(job_path)}",
            "put it on PATH, then `looop cron install` again to carry that PATH",
        )
    return Check("decider program", Verdict.OK, f"`{program}` is {found}")


# A runtime whose program is one of these runs a script: its first operand is that file.
_INTERPRETERS = frozenset(
    {"bash", "sh", "zsh", "dash", "python", "python3", "node", "ruby", "perl", "deno", "bun"}
)


def runtime(cfg: Config, name: str, root: Path, job_path: str | None = None) -> Check:
    """The runtime resolves, its program is on PATH, and the files its command names exist
    (`bash run-agent.sh {{prompt_file}}`: run-agent.sh, relative to the work dir `root`)."""
    from looop_py.workers import runtimes  # only to read the command lines

    try:
        rt = runtimes.resolve(cfg, name)
    except LooopError as exc:
        return Check(f"runtime {name}", Verdict.FAIL, exc.message, exc.hint)
    try:
        words = command_words(rt.command)
    except ValueError as exc:
        return Check(f"runtime {name}", Verdict.FAIL, f"its command does not parse: {exc}")
    program = words[0] if words else ""
    found = shutil.which(program, path=job_path) if program else None
    if found is None:
        return Check(
            f"runtime {name}",
            Verdict.FAIL,
            f"`{program or '?'}` is not on {_where(job_path)}",
            f"install {program or 'its program'}, or set [workers] default_runtime"
            + (", then `looop cron install` again" if job_path is not None else ""),
        )
    if name == "claude" and os.geteuid() == 0 and "--dangerously-skip-permissions" in rt.command:
        return Check(
            "runtime claude",
            Verdict.FAIL,
            "claude refuses --dangerously-skip-permissions as root",
            "run looop as an ordinary user, or set [runtimes.claude] command without that flag",
        )
    for path in _named_files(program, words[1:]):
        if not (root / Path(path).expanduser()).exists():
            return Check(
                f"runtime {name}",
                Verdict.FAIL,
                f"`{program}` is on PATH but `{path}` does not exist (from {root})",
                f"create it, or fix [runtimes.{name}] command in looop.toml",
            )
    return Check(f"runtime {name}", Verdict.OK, f"`{program}` is {found}")


def _named_files(program: str, args: list[str]) -> list[str]:
    """The files a command line names: an interpreter's script (its first operand), and
    every argument written as a path (/…, ./…, ../…, ~/…); never the prompt file."""
    named: list[str] = []
    operand_seen = Path(program).name not in _INTERPRETERS
    inline = False
    for arg in args:
        if inline or "{{" in arg or "$" in arg or arg in ("<", ">", "|", "&&", ";"):
            inline = False  # code given inline, looop's placeholder, shell syntax: no file
            operand_seen = True
            continue
        if arg.startswith("-"):
            inline = not operand_seen and arg in ("-c", "-e", "-m", "--eval")
            continue
        if not operand_seen:
            operand_seen = True
            named.append(arg)
        elif arg.startswith(("/", "./", "../", "~/")):
            named.append(arg)
    return named
