"""The move union (docs/moves.md), strictly validated. Pure: values in, moves out.

A decider proposes a JSON object tagged by `action`; nothing runs until it
parses into one of the dataclasses below. Every field is declared once, with
its kind and size limit, and both `parse` and the JSON schema handed to
structured-output APIs are derived from those declarations.
"""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any

from looop_py.errors import LooopError
from looop_py.ids import is_safe_segment
from looop_py.records import record

NEXT_INTERVAL_MIN_S = 5
NEXT_INTERVAL_MAX_S = 300
KIB = 1024


class MoveError(LooopError):
    """The decider's output is not a valid move; the reason says exactly why."""


def _f(kind: str, *, limit: int = 0, required: bool = True, doc: str = "") -> Any:
    """Declare a move field: kind is id | text | line | int | options."""
    meta = {"kind": kind, "limit": limit, "doc": doc}
    if required:
        return field(metadata=meta)
    return field(default=None, metadata=meta)


# Each move is a @record with repr=False: nothing compares, assigns to (mypy) or prints a
# move object (Move.to_json is what is shown and stored); each generated method is a full
# beat's fixed cost at import (records.py).
@record(repr=False)
class Noop:
    """`noop`: do nothing this beat."""

    reason: str | None = _f("line", limit=1000, required=False)


@record(repr=False)
class WriteGoal:
    """`write_goal`: write goals/<id>.md whole."""

    id: str = _f("id", doc="goal id: goals/<id>.md")
    body: str = _f("text", limit=64 * KIB, doc="the whole markdown file")


@record(repr=False)
class ArchiveGoal:
    """`archive_goal`: move goals/<id>.md into the goals archive."""

    id: str = _f("id")


@record(repr=False)
class WriteSensor:
    """`write_sensor`: write sensors/<name>.sh whole."""

    name: str = _f("id", doc="sensors/<name>.sh")
    script: str = _f("text", limit=64 * KIB, doc="the whole script, with its #! line")


@record(repr=False)
class WritePlaybook:
    """`write_playbook`: write PLAYBOOK.md whole."""

    body: str = _f("text", limit=64 * KIB)


@record(repr=False)
class WriteSchedule:
    """`write_schedule`: a timer that wakes the loop (once, every N s or by cron)."""

    name: str = _f("id")
    in_s: int | None = _f("int", limit=365 * 86400, required=False, doc="one-shot, due in N s")
    every_s: int | None = _f("int", limit=365 * 86400, required=False, doc="recurring, N >= 60")
    cron: str | None = _f("line", limit=200, required=False, doc='5-field cron, "m h dom mon dow"')


@record(repr=False)
class DropSchedule:
    """`drop_schedule`: remove a timer."""

    name: str = _f("id")


@record(repr=False)
class RunShell:
    """`run_shell`: one shell command, run through the gate."""

    cmd: str = _f("text", limit=4 * KIB, doc="one reversible shell command")
    reason: str | None = _f("line", limit=1000, required=False)


@record(repr=False)
class StartWorker:
    """`start_worker`: launch an agent (or shell) worker on a prompt."""

    id: str = _f("id", doc="worker session id (usually the goal id)")
    prompt: str = _f("text", limit=64 * KIB)
    runtime: str | None = _f("id", required=False, doc="claude | codex | pi | aider | shell …")
    verify: str | None = _f("text", limit=4 * KIB, required=False, doc="post-condition command")
    workspace: str | None = _f("id", required=False, doc="none | git-worktree")


@record(repr=False)
class KillWorker:
    """`kill_worker`: stop a worker and the processes it started."""

    id: str = _f("id")
    reason: str | None = _f("line", limit=1000, required=False)


@record(repr=False)
class StartRound:
    """`start_round`: begin a round of a loop goal."""

    loop: str = _f("id", doc="a goal whose frontmatter makes it a loop")
    target: str | None = _f("id", required=False, doc="claim name for the round")


@record(repr=False)
class AskHuman:
    """`ask_human`: a question for a human, with options or free text."""

    prompt: str = _f("text", limit=8 * KIB)
    options: tuple[str, ...] | None = _f("options", limit=20, required=False)


ACTIONS: dict[str, type[Any]] = {
    "noop": Noop,
    "write_goal": WriteGoal,
    "archive_goal": ArchiveGoal,
    "write_sensor": WriteSensor,
    "write_playbook": WritePlaybook,
    "write_schedule": WriteSchedule,
    "drop_schedule": DropSchedule,
    "run_shell": RunShell,
    "start_worker": StartWorker,
    "kill_worker": KillWorker,
    "start_round": StartRound,
    "ask_human": AskHuman,
}
NAMES: dict[type[Any], str] = {cls: name for name, cls in ACTIONS.items()}

Action = (
    Noop
    | WriteGoal
    | ArchiveGoal
    | WriteSensor
    | WritePlaybook
    | WriteSchedule
    | DropSchedule
    | RunShell
    | StartWorker
    | KillWorker
    | StartRound
    | AskHuman
)


@record(repr=False)
class Move:
    """One validated move: the action and what the beat writes beside it."""

    action: Action
    journal: str | None = None
    next_interval_s: int | None = None

    @property
    def name(self) -> str:
        return NAMES[type(self.action)]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.name}
        for f in dataclasses.fields(self.action):
            value = getattr(self.action, f.name)
            if value is not None:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        if self.journal is not None:
            out["journal"] = self.journal
        if self.next_interval_s is not None:
            out["next_interval_s"] = self.next_interval_s
        return out

    def summary(self) -> str:
        """The journal line when the decider gave none."""
        a = self.action
        match a:
            case Noop(reason=reason):
                return "noop" + (f" · {reason}" if reason else "")
            case RunShell(cmd=cmd, reason=reason):
                return f"run-shell · {reason or cmd}"
            case WriteSchedule(name=name, in_s=in_s, every_s=every_s, cron=cron):
                when = (
                    f"in {in_s}s"
                    if in_s is not None
                    else f"every {every_s}s"
                    if every_s is not None
                    else f"cron {cron}"
                )
                return f"write-schedule {name} ({when})"
            case AskHuman(prompt=prompt):
                return f"ask-human · {prompt}"
            case _:
                ident = next((getattr(a, k) for k in ("id", "name", "loop") if hasattr(a, k)), "")
                return f"{self.name.replace('_', '-')} {ident}".strip()


# -- parsing ---------------------------------------------------------------------------


def _check_field(action: str, name: str, meta: dict[str, Any], value: Any) -> Any:
    where = f"{action}.{name}"
    kind, limit = meta["kind"], meta["limit"]
    if kind == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise MoveError(f"{where} must be an integer, got {type(value).__name__}")
        if not 0 < value <= limit:
            raise MoveError(f"{where} must be between 1 and {limit}, got {value}")
        return value
    if kind == "options":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise MoveError(f"{where} must be a list of strings")
        if not 1 <= len(value) <= limit or any(not v.strip() or len(v) > 200 for v in value):
            raise MoveError(f"{where} must hold 1..{limit} non-empty options of ≤200 chars")
        return tuple(value)
    if not isinstance(value, str):
        raise MoveError(f"{where} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise MoveError(f"{where} contains a NUL byte")
    if kind == "id":
        if not is_safe_segment(value):
            raise MoveError(
                f"{where} {value[:80]!r} is not a safe name: use letters, digits, '.', '_', '-'"
                " (no leading dot, no '..', at most 128)"
            )
        return value
    if not value.strip():
        raise MoveError(f"{where} must not be empty")
    if len(value.encode("utf-8")) > limit:
        raise MoveError(f"{where} is {len(value.encode())} bytes; the limit is {limit}")
    return value


def parse(value: Any) -> Move:
    """Validate a decoded decision strictly; raise MoveError naming the first problem."""
    if not isinstance(value, dict):
        raise MoveError(f"a move must be a JSON object, got {type(value).__name__}")
    action = value.get("action")
    if not isinstance(action, str):
        raise MoveError("the move has no string `action` field")
    cls = ACTIONS.get(action)
    if cls is None:
        raise MoveError(f"unknown action {action[:60]!r}; known: {', '.join(ACTIONS)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    extra = sorted(set(value) - set(fields) - {"action", "journal", "next_interval_s"})
    if extra:
        raise MoveError(f"{action} has no field {extra[0][:60]!r}; its fields: {', '.join(fields)}")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        if name not in value or value[name] is None:
            if f.default is dataclasses.MISSING:
                raise MoveError(f"{action} needs `{name}`")
            continue
        kwargs[name] = _check_field(action, name, dict(f.metadata), value[name])
    if action == "write_schedule":
        given = [k for k in ("in_s", "every_s", "cron") if k in kwargs]
        if len(given) != 1:
            raise MoveError("write_schedule needs exactly one of in_s, every_s, cron")
        if kwargs.get("every_s", 60) < 60:
            raise MoveError("write_schedule.every_s must be at least 60")
    if action == "start_worker" and kwargs.get("workspace") not in (None, "none", "git-worktree"):
        raise MoveError("start_worker.workspace must be none or git-worktree")
    journal = value.get("journal")
    if journal is not None and not isinstance(journal, str):
        raise MoveError("journal must be a string")
    nudge = value.get("next_interval_s")
    if nudge is not None:
        if not isinstance(nudge, int | float) or isinstance(nudge, bool):
            raise MoveError("next_interval_s must be a number of seconds")
        nudge = int(min(NEXT_INTERVAL_MAX_S, max(NEXT_INTERVAL_MIN_S, nudge)))
    return Move(cls(**kwargs), journal=journal, next_interval_s=nudge)


# -- JSON schema for structured-output APIs ---------------------------------------------


def _field_schema(meta: dict[str, Any]) -> dict[str, Any]:
    kind = meta["kind"]
    if kind == "int":
        schema: dict[str, Any] = {"type": "integer", "minimum": 1}
    elif kind == "options":
        schema = {"type": "array", "items": {"type": "string"}, "maxItems": meta["limit"]}
    elif kind == "id":
        schema = {"type": "string", "pattern": "^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$"}
    else:
        schema = {"type": "string"}
    if meta.get("doc"):
        schema["description"] = meta["doc"]
    return schema


def json_schema() -> dict[str, Any]:
    """A JSON schema of the move union: one `anyOf` branch per action."""
    branches = []
    for name, cls in ACTIONS.items():
        props: dict[str, Any] = {"action": {"const": name}}
        required = ["action"]
        for f in dataclasses.fields(cls):
            props[f.name] = _field_schema(dict(f.metadata))
            if f.default is dataclasses.MISSING:
                required.append(f.name)
        props["journal"] = {"type": "string", "description": "one line for the journal"}
        props["next_interval_s"] = {
            "type": "integer",
            "description": f"re-decide in N s ({NEXT_INTERVAL_MIN_S}..{NEXT_INTERVAL_MAX_S})",
        }
        branches.append(
            {
                "type": "object",
                "properties": props,
                "required": required,
                "additionalProperties": False,
            }
        )
    return {"anyOf": branches}


def catalogue() -> str:
    """The move table as prompt text: one line per action with its fields."""
    lines = []
    for name, cls in ACTIONS.items():
        parts = []
        for f in dataclasses.fields(cls):
            optional = "?" if f.default is not dataclasses.MISSING else ""
            doc = f.metadata.get("doc")
            parts.append(f"{f.name}{optional}" + (f" ({doc})" if doc else ""))
        lines.append(f'- {{"action": "{name}"' + "".join(f", {p}" for p in parts) + "}")
    return "\n".join(lines)
