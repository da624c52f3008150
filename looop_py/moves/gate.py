"""The one gate every move passes: what it can cause to run, and whether it may run unasked.

Nothing a model writes runs unless a human approved it or a rule the human
wrote allows exactly that. Every move is classified by the most it can cause
to run (TABLE, one row per action of the move union):

    nothing  it runs nothing new (noop, schedules, asks, archiving, killing, rounds)
    text     prose a human or an agent CLI reads; never handed to an interpreter
    code     something an interpreter executes: a shell command, a worker prompt on a
             runtime that executes it, a verify command, a sensor, a loop's program

A code move runs unasked only when a human-written rule allows exactly that:
`[gates] shell_allow` for a command (run_shell, verify), `[gates] allow_runtimes`
for a prompt run as code, `[gates] allow_sensors` for a sensor, or a goal file a
human wrote that defines exactly that worker (its `work:`, `runtime:`, `verify:`).
Otherwise it becomes an approval ask that shows exactly what would run (the
command, the script, or the diff of the file it replaces, with that file's
fingerprint); `looop approve` runs exactly that, or refuses it as stale.

`classify` is pure; `admit` reads the files it needs and files the ask.
"""

from __future__ import annotations

import difflib
import enum
import fnmatch
import shlex
from dataclasses import dataclass, replace
from typing import Any

from looop_py import glyphs
from looop_py.asks import mailbox
from looop_py.engine.spec import is_loop
from looop_py.errors import LooopError
from looop_py.moves import shellgate
from looop_py.moves.union import (
    Move,
    RunShell,
    StartWorker,
    WriteGoal,
    WriteSensor,
)
from looop_py.workdir import provenance
from looop_py.workdir.config import Config
from looop_py.workdir.context import WorkDir
from looop_py.workdir.frontmatter import frontmatter
from looop_py.workdir.goals import outside_link
from looop_py.workers import runtimes

SHOWN_LIMIT = 48 * 1024  # an ask shows at most this much of a script or diff, then says so


class Power(enum.StrEnum):
    NOTHING = "nothing"
    TEXT = "text"
    CODE = "code"


@dataclass(frozen=True)
class Row:
    power: Power  # the most this action can cause to run
    what: str  # what it does, for docs/safety.md's table
    unasked: str  # when it runs without a human


# The classification: one row per action of the move union (tests check none is missing).
TABLE: dict[str, Row] = {
    "noop": Row(Power.NOTHING, "nothing", "always"),
    "write_schedule": Row(Power.NOTHING, "a timer that wakes the decider", "always"),
    "drop_schedule": Row(Power.NOTHING, "drops such a timer", "always"),
    "archive_goal": Row(Power.NOTHING, "moves a goal to goals/archive/", "always"),
    "ask_human": Row(Power.NOTHING, "a question in asks/", "always"),
    "kill_worker": Row(Power.NOTHING, "ends one of looop's own workers", "always"),
    "start_round": Row(
        Power.NOTHING,
        "a round of a loop as its goal file defines it (a model-written file runs at L1)",
        "always",
    ),
    "write_playbook": Row(Power.TEXT, "PLAYBOOK.md, prose the decider reads", "always"),
    "write_goal": Row(
        Power.CODE,
        "a goal; code when it creates or changes what runs: any frontmatter of a loop,"
        " or a plain goal's on/work/runtime/verify/target (or its body, run as `work:`)",
        "text: always; code: never",
    ),
    "write_sensor": Row(Power.CODE, "a script the next beat runs", "[gates] allow_sensors"),
    "run_shell": Row(Power.CODE, "a shell command", "[gates] shell_allow (whole argv)"),
    "start_worker": Row(
        Power.CODE,
        "a worker; code when its runtime runs the prompt (shell) or it has a verify command",
        "agent runtime: always; [gates] allow_runtimes, shell_allow for verify,"
        " or a human's goal defining exactly that worker",
    ),
}


@dataclass(frozen=True)
class Verdict:
    power: Power
    why: str = ""  # what makes it code
    runs: str = ""  # exactly what would run or change: the command, script or diff
    file: str | None = None  # the work-dir file the move replaces (its fingerprint is kept)
    allowed_by: str | None = None  # the human-written rule that lets it run unasked
    refused: str | None = None  # the tripwire rule it trips: it never runs
    argv: tuple[str, ...] = ()  # run_shell allowed by shell_allow: run without a shell
    verify: str | None = None  # start_worker: the verify command as it will run

    @property
    def needs_approval(self) -> bool:
        return self.power is Power.CODE and self.allowed_by is None and self.refused is None


# -- what a goal file makes run ---------------------------------------------------------

PLAIN_KEYS = ("on", "work", "runtime", "verify", "target")


def executable_parts(text: str | None) -> dict[str, Any]:
    """What in a goal file decides what runs. Its other text is prose.

    A loop's whole frontmatter is its program (maker, checker, runtime, level,
    allow, action, target, cadence, on — and the intent, framed into the
    maker's script). A plain goal's `on/work/runtime/verify/target` are what
    the rules decider starts; with `on:` and no `work:` the body is the work.
    A frontmatter that does not parse runs nothing.
    """
    if text is None:
        return {}
    try:
        meta, body = frontmatter(text)
    except LooopError:
        return {}
    if is_loop(meta):
        return {"loop": meta}
    parts = {k: meta[k] for k in PLAIN_KEYS if k in meta}
    if "on" in parts and "work" not in parts:
        parts["work (the body)"] = body
    return parts


def goal_work(text: str) -> tuple[str, str | None, str | None] | None:
    """(prompt, runtime, verify) the rules decider would start for this plain goal."""
    try:
        meta, body = frontmatter(text)
    except LooopError:
        return None
    if is_loop(meta):
        return None
    runtime = str(meta["runtime"]) if meta.get("runtime") else None
    verify = str(meta["verify"]) if meta.get("verify") else None
    return str(meta.get("work") or body), runtime, verify


def diff(rel: str, old: str | None, new: str) -> str:
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{rel}",
        tofile=f"b/{rel}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def sensor_text(script: str) -> str:
    """The file write_sensor writes: the script, with a #! line when it has none."""
    return with_newline(script if script.startswith("#!") else "#!/usr/bin/env bash\n" + script)


# -- classification (pure) -----------------------------------------------------------------


def classify(move: Move, current_file_text: str | None, config: Config) -> Verdict:
    """What `move` can cause to run, and the human rule (if any) that lets it.

    `current_file_text` is the text of the file the move replaces (write_goal:
    goals/<id>.md, write_sensor: sensors/<name>.sh), or for start_worker the
    goal goals/<id>.md when a human wrote it; None when there is none.
    """
    a = move.action
    gates = config.gates
    row = TABLE[move.name]
    match a:
        case RunShell(cmd=cmd):
            sv = shellgate.check_shell(
                cmd, gates.shell_allow, allow_dangerous=gates.allow_dangerous
            )
            if sv.denied is not None:
                return Verdict(Power.CODE, sv.reason, cmd, refused=sv.denied)
            allowed_by = f"[gates] shell_allow: {sv.reason}" if sv.run else None
            return Verdict(Power.CODE, sv.reason, cmd, allowed_by=allowed_by, argv=sv.argv)
        case WriteSensor(name=name, script=script):
            rel = f"sensors/{name}.sh"
            rule = next((p for p in gates.allow_sensors if fnmatch.fnmatchcase(name, p)), None)
            return Verdict(
                Power.CODE,
                "a sensor: the next beat runs it",
                diff(rel, current_file_text, sensor_text(script)),
                file=rel,
                allowed_by=f"[gates] allow_sensors: {rule!r}" if rule else None,
            )
        case WriteGoal(id=goal_id, body=body):
            rel = f"goals/{goal_id}.md"
            new = with_newline(body)
            old_parts, new_parts = executable_parts(current_file_text), executable_parts(new)
            if not new_parts or new_parts == old_parts:
                why = "prose: what runs stays as it is" if new_parts else "prose: nothing runs"
                return Verdict(Power.TEXT, why, file=rel)
            changed = sorted(
                k
                for k in {*old_parts, *new_parts}
                if old_parts.get(k, None) != new_parts.get(k, None)
            )
            what = "a loop's program" if "loop" in new_parts else "what the rules decider runs"
            return Verdict(
                Power.CODE,
                f"it creates or changes {what} ({', '.join(changed)})",
                diff(rel, current_file_text, new),
                file=rel,
            )
        case StartWorker():
            return _classify_worker(a, current_file_text, config)
    return Verdict(row.power, row.what)


# Flags with which an agent CLI runs every tool call without asking (its permission prompts
# off); pi asks for nothing at all. A model's prompt to such an agent is as good as code.
UNATTENDED_FLAGS = (
    "--dangerously-skip-permissions",
    "--dangerously-bypass-approvals-and-sandbox",
    "--permission-mode bypassPermissions",
    "--yolo",
)


def unattended(command: str) -> str | None:
    """The flag (or program) by which an agent runtime's command runs tools unasked."""
    flag = next((f for f in UNATTENDED_FLAGS if f in command), None)
    if flag is not None:
        return f"`{flag}`"
    words = command.split()
    if words and words[0] == "pi" and "--tools" not in command:
        return "`pi`, which runs its tools without asking"
    return None


def _classify_worker(a: StartWorker, goal_text: str | None, config: Config) -> Verdict:
    try:
        rt = runtimes.resolve(config, a.runtime)
    except LooopError as exc:  # launching refuses it too: nothing can run
        return Verdict(Power.TEXT, f"the runtime does not resolve ({exc.message})")
    reasons, shown = [], []
    unprompted = None if rt.executes_prompt else unattended(rt.command)
    if rt.executes_prompt:
        reasons.append(f"runtime {rt.name} runs the prompt as a program (`{rt.command}`)")
        note = " (looop's worker contract goes first, as # comments)" if rt.script else ""
        shown.append(f"# runtime {rt.name}: {rt.command}{note}\n{with_newline(a.prompt)}")
    elif unprompted is not None:
        reasons.append(
            f"runtime {rt.name} runs with the agent's permission prompts off ({unprompted}):"
            " any command the prompt asks for may run"
        )
        shown.append(f"# the prompt {rt.name} obeys unattended:\n{with_newline(a.prompt)}")
    verify = a.verify
    verify_rule = None
    if verify is not None:
        reasons.append("its verify command runs in the work dir after it ends")
        shown.append(f"# verify (bash, from the work dir):\n{with_newline(verify)}")
        gates = config.gates
        sv = shellgate.check_shell(verify, gates.shell_allow, allow_dangerous=gates.allow_dangerous)
        if sv.denied is not None:
            return Verdict(Power.CODE, "; ".join(reasons), "\n".join(shown), refused=sv.denied)
        if sv.run:
            verify_rule = f"[gates] shell_allow: {sv.reason}"
            verify = shlex.join(sv.argv)  # as matched: no globbing, no expansion
    if not reasons:
        return Verdict(Power.TEXT, f"prose for the {rt.name} agent")
    verdict = Verdict(Power.CODE, "; ".join(reasons), "\n".join(shown), verify=verify)
    if goal_text is not None and goal_work(goal_text) == (a.prompt, a.runtime, a.verify):
        return replace(
            verdict,
            allowed_by=f"goals/{a.id}.md, written by a human, defines this worker",
            verify=a.verify,
        )
    rules = []
    if rt.executes_prompt or unprompted is not None:
        if rt.name not in config.gates.allow_runtimes:
            return verdict
        rules.append(f"[gates] allow_runtimes: {rt.name!r}")
    if a.verify is not None:
        if verify_rule is None:
            return verdict
        rules.append(verify_rule)
    return replace(verdict, allowed_by="; ".join(rules))


# -- admission: read the files, classify, hold what needs a human ------------------------


@dataclass(frozen=True)
class Admission:
    verdict: Verdict
    run: bool  # carry it out now
    held: str | None = None  # the approval ask filed instead


def _read(wd: WorkDir, rel: str) -> bytes | None:
    """A work-dir file's bytes; None if absent, or a link out of the work dir (never shown)."""
    try:
        if outside_link(wd, wd.paths.root / rel):
            return None
        return (wd.paths.root / rel).read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def current_file(wd: WorkDir, move: Move) -> tuple[str | None, bytes | None]:
    """(work-dir path, bytes) of the file a write_goal or write_sensor replaces."""
    a = move.action
    if isinstance(a, WriteGoal):
        rel = f"goals/{a.id}.md"
    elif isinstance(a, WriteSensor):
        rel = f"sensors/{a.name}.sh"
    else:
        return None, None
    return rel, _read(wd, rel)


def judge(wd: WorkDir, move: Move) -> tuple[Verdict, str]:
    """The verdict on `move` against the files as they are now; the replaced file's fingerprint."""
    config = wd.config
    rel, data = current_file(wd, move)
    if isinstance(move.action, StartWorker):
        rel = f"goals/{move.action.id}.md"
        data = _read(wd, rel)
        if provenance.written_by_model(wd.paths, rel, data):
            data = None  # a goal a model wrote is no human's rule
        text = None if data is None else data.decode("utf-8", "replace")
        return classify(move, text, config), provenance.ABSENT
    text = None if data is None else data.decode("utf-8", "replace")
    return classify(move, text, config), provenance.fingerprint(data)


def admit(wd: WorkDir, move: Move, now: float, *, approved: bool = False) -> Admission:
    """The gate act.py calls for every move before it carries it out."""
    verdict, fingerprint = judge(wd, move)
    if verdict.refused is not None:
        return Admission(verdict, run=False)
    if approved or not verdict.needs_approval:
        return Admission(verdict, run=True)
    ask = mailbox.open_ask(
        wd,
        prompt=approval_prompt(move, verdict, fingerprint),
        asker="decider",
        now=now,
        kind=mailbox.AskKind.APPROVAL,
        hold={
            "move": move.to_json(),
            "power": verdict.power.value,
            "why": verdict.why,
            "runs": verdict.runs,
            "file": verdict.file,
            "fingerprint": fingerprint if verdict.file else None,
        },
    )
    return Admission(verdict, run=False, held=ask.id)


def _indent(text: str) -> str:
    if len(text) > SHOWN_LIMIT:
        text = text[:SHOWN_LIMIT] + f"\n… ({len(text) - SHOWN_LIMIT} more characters in the ask)\n"
    return "".join(f"    {line}" for line in with_newline(text).splitlines(keepends=True))


def approval_prompt(move: Move, verdict: Verdict, fingerprint: str | None) -> str:
    """The ask a human reads: the move, why it waits, and exactly what would run."""
    a = move.action
    reason = getattr(a, "reason", None)
    lines = [f"The decider proposes: {move.summary()}"]
    if reason:
        lines.append(f"Reason given: {reason}")
    lines.append(f"It waits for you because it is code: {verdict.why}.")
    unseen = glyphs.hidden(verdict.runs or "")
    if unseen:
        lines.append(
            f"WARNING: it contains characters a human cannot see: {', '.join(unseen)}"
            " (shown below as escapes; they run as the characters they are)."
        )
    if verdict.file:
        lines.append(f"File: {verdict.file} (now: {fingerprint}); approving writes exactly:")
    else:
        lines.append("Approving runs exactly this, once:")
    return glyphs.visible("\n".join(lines)) + "\n\n" + _indent(glyphs.visible(verdict.runs))


def display(ask: mailbox.Ask) -> str:
    """What `looop asks` shows for an ask: its prompt, and the exact text an approval holds
    (every character a human cannot see spelled out, glyphs.py)."""
    runs = ask.hold.get("runs")
    prompt = glyphs.visible(ask.prompt)
    if not isinstance(runs, str) or not runs:
        return prompt
    shown = _indent(glyphs.visible(runs))
    return prompt if shown in prompt else f"{prompt.rstrip()}\n\nWhat would run:\n{shown}"
