"""Ready `[decider]` settings for the agent CLIs `looop init` finds on PATH, and the runtime.

Each found CLI becomes a commented block in the new looop.toml, placed where
the starter file's `[decider]` table has its `# looop:agent-clis` marker, so
uncommenting one block's lines is all it takes. No decider is activated: the
default stays the offline `rules` decider until the user opts in.

Workers are another matter: the first agent CLI found that is also a worker
runtime (claude, codex, pi, aider) becomes `[workers] default_runtime`, so a
worker's prompt goes to an agent that reads prose rather than to bash. With
none found, `shell` stays (and a model's shell worker needs an approval).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

MARKER = "# looop:agent-clis"
AGENT_RUNTIMES = ("claude", "codex", "pi", "aider")  # built-in runtimes, in order of preference
# claude refuses --dangerously-skip-permissions as root ("cannot be used with root/sudo
# privileges"), so as root it would fail every worker: init picks the next one found.
REFUSES_ROOT = frozenset({"claude"})
RUNTIME_LINE = '# default_runtime = "shell"'


# codex 0.169 reaches github.com and chatgpt.com on every run, even with a custom provider:
# its update check, analytics and the curated-plugins sync. Off for deciders and workers.
CODEX_QUIET = (
    "-c check_for_update_on_startup=false -c analytics.enabled=false -c features.plugins=false"
)


@dataclass(frozen=True)
class Preset:
    cli: str  # the executable looked up on PATH
    note: str
    settings: tuple[str, ...]  # TOML lines for [decider], uncommented form


PRESETS = (
    Preset(
        "claude",
        "Claude Code, headless; the prompt goes on stdin, usage and cost are read back",
        ('backend = "command"', 'command = "claude -p --output-format json --model sonnet"'),
    ),
    Preset(
        "codex",
        "OpenAI Codex CLI in its read-only sandbox; the prompt goes on stdin (the `-`)",
        (
            'backend = "command"',
            'command = "codex exec --json --sandbox read-only --skip-git-repo-check'
            f' {CODEX_QUIET} -"',
        ),
    ),
    Preset(
        "pi",
        "pi, headless; the prompt is passed as a file",
        ('backend = "command"', 'command = "pi -p --mode json --no-session @{{prompt_file}}"'),
    ),
    Preset(
        "llm",
        "llm with its default model (add -m MODEL); the prompt goes on stdin, -u reports usage",
        ('backend = "command"', 'command = "llm --no-stream -u"'),
    ),
    Preset(
        "ollama",
        "Ollama's OpenAI-compatible API on this machine, no key; use a model you pulled",
        ('backend = "openai"', 'base_url = "http://localhost:11434/v1"', 'model = "llama3.2"'),
    ),
)


def detect(path: str | None = None) -> list[tuple[Preset, str]]:
    """(preset, where) for each known agent CLI on `path` (default: $PATH)."""
    found = []
    for preset in PRESETS:
        where = shutil.which(preset.cli, path=path)
        if where:
            found.append((preset, where))
    return found


def render(found: list[tuple[Preset, str]]) -> str:
    if not found:
        return "# (no agent CLI was found on PATH when `looop init` wrote this file)\n"
    out = ["# Agent CLIs found on PATH by `looop init`; to use one, uncomment its lines:"]
    for preset, where in found:
        out.append("#")
        out.append(f"# {preset.cli} ({where}): {preset.note}")
        out.extend(f"# {line}" for line in preset.settings)
    return "\n".join(out) + "\n"


def apply(template: str, found: list[tuple[Preset, str]]) -> str:
    """The starter looop.toml with the marker line replaced by the rendered blocks."""
    block = render(found)
    lines = template.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(MARKER):
            return "".join([*lines[:i], block, *lines[i + 1 :]])
    # No marker (a customised template): append, naming the table the lines belong in.
    return template + ("" if template.endswith("\n") else "\n") + "# [decider]\n" + block


def detect_runtime(path: str | None = None, *, root: bool | None = None) -> str | None:
    """The first agent CLI on `path` (default: $PATH) that is also a worker runtime and,
    for root (default: whether this process is), does not refuse to run as root."""
    if root is None:
        root = os.geteuid() == 0
    usable = [cli for cli in AGENT_RUNTIMES if not (root and cli in REFUSES_ROOT)]
    return next((cli for cli in usable if shutil.which(cli, path=path)), None)


def apply_runtime(template: str, runtime: str | None) -> str:
    """The starter looop.toml with `[workers] default_runtime` set to `runtime` (if any)."""
    if runtime is None:
        return template
    line = (
        f'default_runtime = "{runtime}"   # found on PATH by `looop init`;'
        ' "shell" would run prompts as bash'
    )
    lines = template.splitlines(keepends=True)
    for i, old in enumerate(lines):
        if old.startswith(RUNTIME_LINE):
            return "".join([*lines[:i], line + "\n", *lines[i + 1 :]])
    return template  # a customised template without the line: leave it as it is
