"""Any agent CLI as the decider: `claude -p`, `codex exec`, `pi -p`, `llm`, `ollama run` …

`[decider] command` runs under `bash -c` in the work dir. The prompt goes on
its stdin, unless the command names `{{prompt_file}}`: then the prompt is
written to a private temp file whose shell-quoted path replaces the
placeholder (and stdin is empty). One JSON object is read from stdout,
through the envelopes parse.py knows. At `timeout_s` the whole process
group is killed, so an agent's own children die with it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tempfile
import time
from pathlib import Path

from looop_py import procs
from looop_py.deciders import parse, pricing
from looop_py.deciders.base import DecideError, DecideRequest, Decision
from looop_py.errors import ConfigError
from looop_py.workdir.config import DeciderConfig

PLACEHOLDER = "{{prompt_file}}"
STDOUT_CAP = 4 * 1024 * 1024
STDERR_TAIL = 2048


def render(command: str, prompt_file: Path) -> str:
    """Replace {{prompt_file}} with the quoted path, also where the user quoted it already."""
    quoted = shlex.quote(str(prompt_file))
    for form in (f"'{PLACEHOLDER}'", f'"{PLACEHOLDER}"', PLACEHOLDER):
        command = command.replace(form, quoted)
    return command


class CommandDecider:
    name = "command"

    def __init__(self, cfg: DeciderConfig) -> None:
        if not cfg.command.strip():
            raise ConfigError(
                "[decider] backend command needs a command",
                'e.g. command = "claude -p --output-format json"; see the examples in looop.toml',
            )
        self.cfg = cfg

    def decide(self, request: DecideRequest) -> Decision:
        fd, name = tempfile.mkstemp(prefix="looop-prompt-", suffix=".md")
        prompt_file = Path(name)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(request.prompt.encode("utf-8"))
            uses_file = PLACEHOLDER in self.cfg.command
            script = render(self.cfg.command, prompt_file) if uses_file else self.cfg.command
            stdin = None if uses_file else prompt_file
            started = time.monotonic()
            result = procs.run(
                ["bash", "-c", script],
                cwd=request.workdir,
                env={**request.env, "LOOOP_DECIDE": "1"},
                timeout_s=self.cfg.timeout_s,
                cap=STDOUT_CAP,
                stdin=stdin,
                stderr_tail=STDERR_TAIL,
            )
            latency = time.monotonic() - started
        finally:
            with contextlib.suppress(OSError):
                prompt_file.unlink()
        return self._read(result, latency)

    def _read(self, result: procs.Result, latency: float) -> Decision:
        stderr = " ".join(result.stderr_tail.decode("utf-8", "replace").split())[-500:]
        tail = f"; stderr: {stderr}" if stderr else ""
        if result.returncode is None:
            raise DecideError(f"could not start bash for the decider command{tail}")
        if result.timed_out:
            raise DecideError(
                f"the decider command gave no answer within {self.cfg.timeout_s:g}s;"
                f" its process group was killed{tail}",
                "raise [decider] timeout_s, or use a faster model",
            )
        if result.stdout_bytes > STDOUT_CAP:
            raise DecideError(
                f"the decider command printed {result.stdout_bytes} bytes; the cap is {STDOUT_CAP}"
            )
        if result.exit_code != 0:
            raise DecideError(
                f"the decider command exited {result.exit_code}{tail}",
                "run it by hand in the work dir to see why, or try `looop decider test`",
            )
        raw = result.stdout.decode("utf-8", "replace")
        try:
            parsed = parse.parse_output(result.stdout)
        except DecideError as exc:
            exc.raw = raw
            raise
        meta = {
            "backend": self.name,
            "source": parsed.source,
            "latency_s": round(latency, 3),
            "exit_code": result.exit_code,
        }
        return Decision(
            move=parsed.value,
            raw=raw,
            usage=pricing.priced(parsed.usage, self.cfg),
            meta=meta,
        )
