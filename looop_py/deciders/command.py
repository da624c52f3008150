"""Any agent CLI as the decider: `claude -p`, `codex exec`, `pi -p`, `llm`, `ollama run` …

`[decider] command` runs under `bash -c` in the work dir. The prompt goes on
its stdin, unless the command names `{{prompt_file}}`: then the prompt is
written to a private temp file whose shell-quoted path replaces the
placeholder (and stdin is empty). One JSON object is read from stdout,
through the envelopes parse.py knows. At `timeout_s` the whole process
group is killed, so an agent's own children die with it.

The envelope is read whatever the exit code: an agent CLI that fails says why
in it (claude's `is_error` result, codex's `turn.failed`, pi's error message),
and that text, not just "exited 1", is the reason the beat reports; the raw
output is kept for runs/. Where the output is read, the failure is typed
(base.py): the envelope or, without one, stderr naming a temporary cause (a
429 or 5xx status, an overload) makes a TemporaryError; a timeout is
TimedOut; anything else is permanent.

A decide is ONE run of the CLI, whatever the failure. The CLI already retries
a 429/5xx/dropped stream itself, honouring Retry-After, and looop bounds those
retries through its environment (workdir/environ.py AGENT_CLI_ENV: claude 2
retries, so ≤ 3 requests a beat) and, for codex and pi, which read them only from
their own config, through codex's `-c` flags and a looop-owned pi agent dir
(workdir/cliretries.py: 3 requests a beat each, down from 30 and 12); retrying
the CLI as well multiplied them (5 × codex's 30 = 150 requests a beat). A
failure types the beat's backoff; a later beat tries again, and the pulse lock
is not held meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import tempfile
import time
from pathlib import Path

from looop_py import jsonio, procs
from looop_py.deciders import parse, pricing
from looop_py.deciders.base import (
    DecideError,
    DecideRequest,
    Decision,
    InvalidReply,
    PermanentError,
    TimedOut,
    Usage,
)
from looop_py.errors import ConfigError
from looop_py.workdir import cliretries
from looop_py.workdir.config import DeciderConfig

PLACEHOLDER = "{{prompt_file}}"
STDOUT_CAP = 4 * 1024 * 1024
STDERR_TAIL = 2048
# bash's own exit codes for a command it could not run: not executable, not found.
_NOT_RUN = (126, 127)
# `llm -u` prints its usage to stderr: "Token usage: 120 input, 30 output", then the
# provider's non-zero details as JSON: `, {"prompt_tokens_details": {"cached_tokens": 100}}`.
_LLM_USAGE = re.compile(rb"Token usage: ([\d,]+) input, ([\d,]+) output(?:, (\{.*\}))?")


def render(command: str, prompt_file: Path) -> str:
    """Replace {{prompt_file}} with the quoted path, also where the user quoted it already."""
    quoted = shlex.quote(str(prompt_file))
    for form in (f"'{PLACEHOLDER}'", f'"{PLACEHOLDER}"', PLACEHOLDER):
        command = command.replace(form, quoted)
    return command


class CommandDecider:
    name = "command"
    reads_prompt = True

    def __init__(self, cfg: DeciderConfig) -> None:
        if not cfg.command.strip():
            raise ConfigError(
                "[decider] backend command needs a command",
                'e.g. command = "claude -p --output-format json"; see the examples in looop.toml',
            )
        self.cfg = cfg

    def decide(self, request: DecideRequest) -> Decision:
        """One run of the CLI: its own retries (bounded by AGENT_CLI_ENV) are all this beat
        makes; a failure yields the pulse lock and a later beat tries again."""
        decision = self._once(request)
        return Decision(
            decision.move, decision.raw, decision.usage, {**decision.meta, "attempts": 1}
        )

    def _once(self, request: DecideRequest) -> Decision:
        fd, name = tempfile.mkstemp(prefix="looop-prompt-", suffix=".md")
        prompt_file = Path(name)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(request.prompt.encode("utf-8"))
            uses_file = PLACEHOLDER in self.cfg.command
            script = render(self.cfg.command, prompt_file) if uses_file else self.cfg.command
            script = cliretries.bound_codex(script, request.env)
            env = cliretries.bound_pi(script, request.env, request.state_dir)
            stdin = None if uses_file else prompt_file
            started = time.monotonic()
            result = procs.run(
                ["bash", "-c", script],
                cwd=request.workdir,
                env={**env, "LOOOP_DECIDE": "1"},
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
        """The decision in what the command printed; a failure carries the usage it reported
        (an invalid reply or a failed CLI was billed all the same)."""
        try:
            return self._decision(result, latency)
        except DecideError as exc:
            exc.usage = pricing.priced(exc.usage or _stderr_usage(result.stderr_tail), self.cfg)
            raise

    def _decision(self, result: procs.Result, latency: float) -> Decision:
        stderr = " ".join(result.stderr_tail.decode("utf-8", "replace").split())[-500:]
        tail = f"; stderr: {stderr}" if stderr else ""
        if result.returncode is None:
            raise PermanentError(f"could not start bash for the decider command{tail}")
        if result.timed_out:
            raise TimedOut(
                f"the decider command gave no answer within {self.cfg.timeout_s:g}s;"
                f" its process group was killed{tail}",
                "raise [decider] timeout_s, or use a faster model",
            )
        if result.stdout_bytes > STDOUT_CAP:
            raise InvalidReply(
                f"the decider command printed {result.stdout_bytes} bytes; the cap is {STDOUT_CAP}"
            )
        raw = result.stdout.decode("utf-8", "replace")
        failed = result.exit_code != 0
        try:
            parsed = parse.parse_output(result.stdout)
        except DecideError as exc:
            if not failed:
                exc.raw = raw
                raise
            # The CLI's own words (an envelope's error, typed where it was read), else
            # its stderr, typed here: the one place looop sees it.
            cli = isinstance(exc, parse.CliError)
            said = exc.message if cli else stderr[-300:]
            message = f"the decider command exited {result.exit_code}" + (
                f": {said}" if said else ""
            )
            hint = exc.hint or (
                "run it by hand in the work dir to see why, or try `looop decider test`"
            )
            if cli:
                error: DecideError = exc  # keeps the usage its envelope reported
                error.message, error.hint = message, hint
            elif result.exit_code in _NOT_RUN:
                error = PermanentError(message, hint)
            else:
                error = parse.cli_error(message, hint)
            error.raw, error.usage = raw, exc.usage
            raise error from None
        if failed:
            refused = PermanentError(
                f"the decider command exited {result.exit_code} after printing a reply{tail}",
                "a CLI that fails is not trusted with a move; run it by hand to see why",
            )
            refused.raw, refused.usage = raw, parsed.usage
            raise refused
        usage = parsed.usage or _stderr_usage(result.stderr_tail)
        meta = {
            "backend": self.name,
            "source": parsed.source,
            "latency_s": round(latency, 3),
            "exit_code": result.exit_code,
        }
        return Decision(
            move=parsed.value,
            raw=raw,
            usage=pricing.priced(usage, self.cfg),
            meta=meta,
        )


def _stderr_usage(stderr: bytes) -> Usage | None:
    """Usage a CLI printed on stderr (`llm -u`); None when there is none."""
    found = _LLM_USAGE.findall(stderr)
    if not found:
        return None
    tokens_in, tokens_out, details = found[-1]
    count_in = int(tokens_in.replace(b",", b""))
    return Usage(count_in, int(tokens_out.replace(b",", b"")), None, _llm_cached(details, count_in))


def _llm_cached(details: bytes, tokens_in: int) -> int:
    """The cached prompt tokens in llm's usage details (OpenAI's `prompt_tokens_details`)."""
    try:
        data = jsonio.loads(details) if details else None
    except jsonio.JSONDecodeError:
        return 0
    prompt = data.get("prompt_tokens_details") if isinstance(data, dict) else None
    cached = prompt.get("cached_tokens") if isinstance(prompt, dict) else None
    if not isinstance(cached, int) or isinstance(cached, bool) or cached < 0:
        return 0
    return min(cached, tokens_in)
