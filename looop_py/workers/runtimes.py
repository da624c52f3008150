"""Worker runtimes: how each agent CLI is launched, the worker contract, usage in its output.

A runtime is one bash command line holding `{{prompt_file}}`. Workers run
detached with no terminal, so every built-in uses its CLI's non-interactive
mode, and reads the prompt from a file (argv is capped at 128 KiB on Linux).
`[runtimes.NAME]` in looop.toml overrides a built-in or adds a new one.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looop_py.errors import BadWorkerRequest, ConfigError
from looop_py.workdir.presets import CODEX_QUIET
from looop_py.workers import streams

if TYPE_CHECKING:
    from looop_py.workdir.config import Config

PLACEHOLDER = "{{prompt_file}}"


@dataclass(frozen=True)
class Runtime:
    name: str
    command: str  # bash, with {{prompt_file}}
    usage: str = ""  # which JSON stream to read usage from ("" = the worker reports it)
    script: bool = False  # the prompt is itself a bash script: the contract goes in as comments
    read_only: str = ""  # the command in the CLI's read-only mode ("" = it has none)
    # Safety (moves/gate.py): does the prompt itself run as code? An agent CLI reads prose;
    # `shell` runs it with bash, and a runtime looop does not know is assumed to run it.
    executes_prompt: bool = False
    env: tuple[str, ...] = ()  # scrubbed variables passed through to it ([runtimes.NAME] env)
    # Can the agent run shell commands (so `looop done`, `ask`, `claim`)? aider cannot:
    # its contract asks for a STATUS line in its last message, which looop records.
    runs_commands: bool = True
    # The CLI's own cap on agent turns (claude --max-turns); looop counts tool calls in
    # the stream of every runtime that has one and stops the worker past the cap anyway.
    turns_flag: str = ""

    def launch_template(self, read_only: bool) -> str:
        """The command to run; an L1 worker gets the read-only mode when the CLI has one."""
        return self.read_only if read_only and self.read_only else self.command


# aider 0.86: --message-file sends one request (and its own follow-ups) and exits, with 0
# whatever happened; --yes-always answers its questions but declines shell commands.
# Off: git (no repo created in the work dir, no .gitignore edited, nothing committed), the
# update check, release notes, analytics, scraping URLs in the prompt, shell-command
# suggestions, a browser (BROWSER=true: aider offers to open URLs, and "yes" would), and
# litellm's price-list fetch (LITELLM_LOCAL_MODEL_COST_MAP). --no-stream: the provider's
# own token counts. Its event log and chat history go to the session dir (workers/aider.py).
AIDER = " ".join(
    (
        "LITELLM_LOCAL_MODEL_COST_MAP=True BROWSER=true aider --message-file {{prompt_file}}",
        "--yes-always --no-pretty --no-stream --no-git --no-gitignore --no-check-update",
        "--no-show-release-notes --no-analytics --no-detect-urls --no-suggest-shell-commands",
        '--analytics-log "$LOOOP_SESSION_DIR/aider.events.jsonl"',
        '--chat-history-file "$LOOOP_SESSION_DIR/aider.chat.md"',
        '--input-history-file "$LOOOP_SESSION_DIR/aider.input.history"',
    )
)

BUILTINS: dict[str, Runtime] = {
    # Headless mode; stream-json ends with a `result` line carrying usage and cost.
    "claude": Runtime(
        "claude",
        "claude -p --output-format stream-json --verbose --dangerously-skip-permissions"
        " < {{prompt_file}}",
        usage="claude",
        turns_flag="--max-turns",
        # plan mode: reads and searches only, no edits and no commands.
        read_only="claude -p --output-format stream-json --verbose --permission-mode plan"
        " < {{prompt_file}}",
    ),
    # `codex exec -` reads the prompt from stdin; --json prints turn.completed usage events.
    # CODEX_QUIET: no update check, analytics or plugin sync (github.com, chatgpt.com).
    "codex": Runtime(
        "codex",
        "codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox"
        f" {CODEX_QUIET} - < {{{{prompt_file}}}}",
        usage="codex",
        read_only="codex exec --json --skip-git-repo-check --sandbox read-only"
        f" {CODEX_QUIET} - < {{{{prompt_file}}}}",
    ),
    # `@file` puts the file into the first prompt; --print runs once and exits; every
    # assistant message in its json stream carries usage and cost. Read-only: only the
    # read tools, so it cannot write (it reports through its final message).
    "pi": Runtime(
        "pi",
        "pi --print --mode json @{{prompt_file}}",
        usage="pi",
        read_only="pi --print --mode json --tools read,grep,find,ls @{{prompt_file}}",
    ),
    # aider, unattended (see AIDER): it cannot run looop, so looop reads its result and
    # usage from the files it writes into the session dir. No read-only mode (--dry-run
    # still creates .git and its history files): an L1 aider worker runs in a throwaway copy.
    "aider": Runtime("aider", AIDER, usage="aider", runs_commands=False),
    # The offline default: the prompt is a bash script.
    "shell": Runtime("shell", "bash {{prompt_file}}", script=True, executes_prompt=True),
}

USAGE_KINDS = streams.KINDS


def known(config: Config) -> list[str]:
    return sorted({*BUILTINS, *config.runtimes})


def resolve(config: Config, name: str | None) -> Runtime:
    """The runtime called `name` (default: [workers] default_runtime), config over built-in."""
    name = name or config.workers.default_runtime
    base = BUILTINS.get(name)
    custom = config.runtimes.get(name)
    if base is None and custom is None:
        raise BadWorkerRequest(
            f"unknown runtime {name!r}",
            f"use one of {', '.join(known(config))}, or add [runtimes.{name}] to looop.toml",
        )
    if custom is None:
        assert base is not None
        return base
    executes = custom.executes_prompt
    if executes is None:
        executes = base.executes_prompt if base else True
    command = custom.command or (base.command if base else "")
    where = f"looop.toml [runtimes.{name}]"
    if not command:
        raise ConfigError(f"{where} has no command", f'add: command = "mytool {PLACEHOLDER}"')
    if PLACEHOLDER not in command:
        raise ConfigError(
            f"{where} command does not hold {PLACEHOLDER}",
            "the worker reads its prompt from that file; put the placeholder where the path goes",
        )
    if custom.usage not in USAGE_KINDS:
        raise ConfigError(f"{where} usage should be one of {USAGE_KINDS}, got {custom.usage!r}")
    # An override keeps what the name implies: claude's stream, shell's script.
    usage = custom.usage or (base.usage if base else "")
    read_only = custom.read_only or (base.read_only if base and not custom.command else "")
    if read_only and PLACEHOLDER not in read_only:
        raise ConfigError(f"{where} read_only does not hold {PLACEHOLDER}")
    return Runtime(
        name,
        command,
        usage=usage,
        script=base.script if base else False,
        read_only=read_only,
        executes_prompt=executes,
        env=custom.env,
        runs_commands=base.runs_commands if base else True,
        turns_flag=base.turns_flag if base else "",
    )


def launch_command(
    runtime: Runtime, prompt_file: Path, *, read_only: bool = False, max_iters: int | None = None
) -> str:
    """The command with the prompt path shell-quoted (also where the template quoted it);
    with `max_iters`, the CLI's own turn flag after its name when the command starts with it."""
    quoted = shlex.quote(str(prompt_file))
    command = runtime.launch_template(read_only)
    cli, _, rest = command.partition(" ")
    if max_iters is not None and runtime.turns_flag and cli == runtime.name:
        # N tool calls take N+1 turns (the last one answers): looop's own count stops it first
        command = f"{cli} {runtime.turns_flag} {int(max_iters) + 1} {rest}"
    for already in (f"'{PLACEHOLDER}'", f'"{PLACEHOLDER}"'):
        command = command.replace(already, quoted)
    return command.replace(PLACEHOLDER, quoted)


# -- the worker contract ---------------------------------------------------------


def contract(session_id: str, runtime: Runtime, workspace: Path | None) -> str:
    """What every worker is told before its task: how to ask, claim, deliver and finish."""
    if not runtime.runs_commands:
        return _contract_without_commands(session_id, runtime, workspace)
    lines = [
        f"LOOOP WORKER CONTRACT (session {session_id}, runtime {runtime.name})",
        "You are a worker started by looop. Your task follows this contract.",
        "- Ask, never guess: for a human decision run",
        '    answer=$("$LOOOP_BIN" ask --prompt "what you need to know")',
        "  It blocks until a human answers and prints only the answer. Stay alive while waiting.",
        '- Claims: before touching a shared target run `"$LOOOP_BIN" claim NAME`.',
        "  Exit 0: it is yours, and stdout is its epoch (a fencing token for what you write).",
        "  Non-zero: someone else holds it; do not proceed. Release it with",
        '  `"$LOOOP_BIN" unclaim NAME` as soon as you are done; never sit on a claim.',
        f'- Deliverables for humans go to "$LOOOP_REPORTS_DIR" (e.g. {session_id}.md there).',
        "- Steering: a human may leave you messages; now and then (and before you finish) run",
        '  `"$LOOOP_BIN" told` and follow what it prints (one message a line; each shown once).',
        "- Never edit PLAYBOOK.md, goals/ or sensors/ in the work dir; propose a change in a",
        "  report and ask.",
        "- Finish by reporting how it went; exiting 0 alone never counts as success:",
        '    "$LOOOP_BIN" done --status done|done-with-concerns|blocked --summary "one line"',
        "  (add --input-tokens N --output-tokens M --cost-usd X if you know what you spent).",
        "- Environment: LOOOP_SESSION_ID, LOOOP_BIN, LOOOP_DIR, LOOOP_CLAIMS_DIR,",
        "  LOOOP_REPORTS_DIR.",
    ]
    if workspace is not None:
        lines += [
            f"- Workspace: a git worktree at {workspace} on branch looop/{session_id}; you start",
            "  there. Commit what should last: a worktree without new commits is removed when",
            "  the session ends, one with commits is kept.",
        ]
    return "\n".join(lines)


def _contract_without_commands(session_id: str, runtime: Runtime, workspace: Path | None) -> str:
    """The contract for an agent that runs no commands (aider): its last message reports."""
    lines = [
        f"LOOOP WORKER CONTRACT (session {session_id}, runtime {runtime.name})",
        "You are a worker started by looop. Your task follows this contract.",
        f"- Here ({runtime.name}) you cannot run shell commands, so you cannot ask a human,",
        "  claim a target or call looop: looop records your result from your last message.",
        "- Never guess a human decision: stop, and say in your last message what you need.",
        "- Never edit PLAYBOOK.md, goals/ or sensors/ in the work dir; propose a change in",
        "  your last message.",
        "- End your last message with one line saying how it went (exiting alone never",
        "  counts as success; without the line looop records done-with-concerns):",
        "    STATUS: done|done-with-concerns|blocked: one-line summary",
    ]
    if workspace is not None:
        lines += [
            f"- Workspace: a git worktree at {workspace} on branch looop/{session_id}; you start",
            "  there. Your edits stay uncommitted; the worktree is kept when they change files",
            "  git tracks.",
        ]
    return "\n".join(lines)


def prompt_text(session_id: str, runtime: Runtime, prompt: str, workspace: Path | None) -> str:
    """prompt.md: the contract, then the task. For a script runtime the contract is comments."""
    text = contract(session_id, runtime, workspace)
    if runtime.script:
        header = "\n".join(f"# {line}".rstrip() for line in text.splitlines())
        return f"{header}\n\n{prompt.rstrip()}\n"
    return f"{text}\n\n---\n\n{prompt.rstrip()}\n"


# -- usage from a runtime's JSON stream -----------------------------------------------


def usage_from_output(kind: str, log: Path) -> dict[str, Any] | None:
    """Tokens and cost a runtime printed in its JSON stream; None when it printed none."""
    return streams.read(kind, log).usage
