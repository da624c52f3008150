"""The decide prompt, built from plain data. Pure: same input, same bytes.

Sections run from stable to volatile (instructions … now), so everything
before WHAT CHANGED is byte-identical across beats that saw the same files and
providers' prompt caches hit. Interpolated text can never start a line with
`===` or `---`, so a goal, a sensor or an ask cannot forge a section; every
item has its own cap and the whole prompt a total cap, with visible markers
where something was cut.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from looop_py import jsonio
from looop_py.moves import union

TOTAL_CAP = 256 * 1024
CAP_PLAYBOOK = 16 * 1024
CAP_GOAL = 8 * 1024
CAP_READING = 4 * 1024
CAP_ASK = 2 * 1024
CAP_JOURNAL_LINE = 500
CAP_DIFF_VALUE = 240
CAP_TAIL = 2048

INSTRUCTIONS = """\
You are the decider of looop, a control loop over files. This call is one beat; you keep no
memory between beats except what the files below show. Read the PLAYBOOK, the goals, the sensor
readings and what changed, then choose the SINGLE most useful move, and stop.

You do not act yourself. You answer with exactly one JSON object, one of these moves, and looop
validates it and carries it out through its own gates:
{catalogue}
Every move may also carry "journal" (one line saying why) and "next_interval_s" (ask to be woken
again in 5..300 s even if nothing changes).

How to choose:
- If nothing needs doing, answer {{"action": "noop", "reason": "..."}}. Most beats need nothing.
- Hands-on or multi-step work goes to a worker (start_worker); give it a clear, complete prompt.
- run_shell is for one quick, reversible, read-mostly command. Commands outside the allowlist wait
  for a human's approval; destructive ones are refused.
- A worker listed in sys-sessions is already on it: do not start a second one for the same goal.
  A stuck worker may be killed and re-dispatched; never kill one that is waiting on a human.
- A claim in sys-claims belongs to the worker holding it: leave that target alone.
- Pending asks belong to humans: never answer them yourself.
- When you lack information only a human has, use ask_human instead of guessing.
Answer with the JSON object only: no prose, no code fence."""

CONSTITUTION = """\
1. Nothing irreversible happens automatically: no merge, deploy, delete, force-push, public
   comment, closing issues or spending money. Prepare it, then a human approves it.
2. run_shell is for reversible, non-destructive commands only; sensors and verify commands
   only read.
3. Policy files (PLAYBOOK.md, goals/, sensors/) change only through typed moves.
4. Ask, do not guess.
5. A write_playbook must keep these five rules intact; they override anything in the PLAYBOOK."""


@dataclass(frozen=True)
class PromptInput:
    now: float
    playbook: str | None
    goals: Sequence[tuple[str, str]]  # (id, body)
    snapshots: Sequence[tuple[str, Any]]  # (stem, {signal, detail})
    asks: Sequence[dict[str, Any]] = ()  # {id, asker, kind, age_s, prompt, live}
    goal_ages: dict[str, float | None] = field(default_factory=dict)  # id → age in s, or None
    journal: Sequence[str] = ()
    changed: Sequence[dict[str, Any]] = ()  # {item, old, new}
    forced_by: str | None = None  # why a decide happened with nothing changed
    flapping: Sequence[str] = ()
    last_shell: dict[str, Any] | None = None  # {cmd, exit_code, output}
    last_failure: str | None = None


def escape(text: str) -> str:
    """Neutralise lines that would read as a section or item header."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("===", "---")):
            lines[i] = "\\" + line
    return "\n".join(lines)


def clip(text: str, cap: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text
    kept = data[:cap].decode("utf-8", "ignore")
    return f"{kept}\n[… truncated: {len(data) - len(kept.encode())} more bytes not shown]"


def _section(title: str, body: str) -> str:
    return f"=== {title} ===\n{body.rstrip()}\n\n"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit} ago"
    return f"{seconds:.0f}s ago"


def _items(title: str, entries: list[str], budget: int, noun: str) -> tuple[str, int]:
    """A list section that stops, visibly, where the budget runs out."""
    body, used = [], 0
    for i, entry in enumerate(entries):
        if used + len(entry.encode()) > budget:
            body.append(f"(section truncated: {len(entries) - i} more {noun} not shown)")
            break
        body.append(entry)
        used += len(entry.encode())
    text = _section(title, "\n".join(body) if body else f"(no {noun})")
    return text, len(text.encode())


def build(inp: PromptInput, total_cap: int = TOTAL_CAP) -> str:
    head = _section("INSTRUCTIONS", INSTRUCTIONS.format(catalogue=union.catalogue()))
    head += _section("CONSTITUTION (immutable; overrides the PLAYBOOK)", CONSTITUTION)
    playbook = (
        "(no PLAYBOOK.md)" if inp.playbook is None else escape(clip(inp.playbook, CAP_PLAYBOOK))
    )
    head += _section("PLAYBOOK", playbook)

    tail = _tail_sections(inp)
    budget = max(0, total_cap - len(head.encode()) - len(tail.encode()))

    goals = [f"--- goals/{gid}.md\n{escape(clip(body, CAP_GOAL))}" for gid, body in inp.goals]
    goals_text, used = _items("GOALS", goals, budget // 2, "goals")
    readings = [
        f"--- {stem}\n{escape(clip(jsonio.canonical(snap).decode(), CAP_READING))}"
        for stem, snap in inp.snapshots
    ]
    readings_text, used2 = _items("SENSOR READINGS", readings, budget - used, "readings")
    asks = [
        f"--- {a['id']} ({a['kind']} from {a['asker']}, {_age(a.get('age_s'))}, "
        f"{'LIVE: blocked on a human' if a.get('live', True) else 'STRANDED: its worker is dead'})"
        f"\n{escape(clip(str(a['prompt']), CAP_ASK))}"
        for a in inp.asks
    ]
    asks_text, _ = _items(
        "PENDING ASKS (waiting on a human; not yours to answer)",
        asks,
        budget - used - used2,
        "pending asks",
    )
    return head + goals_text + readings_text + asks_text + tail


def _tail_sections(inp: PromptInput) -> str:
    out = ""
    if inp.goal_ages:
        gid = min(
            inp.goal_ages, key=lambda g: (inp.goal_ages[g] is not None, -(inp.goal_ages[g] or 0))
        )
        out += _section(
            "FAIRNESS (computed by looop)",
            f"Most neglected goal: {gid} (last acted on: {_age(inp.goal_ages[gid])}). Prefer it"
            " this beat unless something more urgent needs you; otherwise say in `journal` why.",
        )
    journal = [escape(clip(line, CAP_JOURNAL_LINE)) for line in inp.journal]
    out += _section("RECENT JOURNAL", "\n".join(journal) if journal else "(empty)")
    out += _section("WHAT CHANGED (since your last decision; computed by looop)", _changes(inp))
    if inp.last_shell:
        s = inp.last_shell
        out += _section(
            "RUN_SHELL OUTPUT (your previous move; shown once)",
            f"$ {escape(str(s.get('cmd')))}\nexit {s.get('exit_code')}\n"
            + escape(clip(str(s.get("output", "")), CAP_TAIL)),
        )
    if inp.last_failure:
        out += _section(
            "LAST FAILURE (your previous attempt; do not repeat it)",
            escape(clip(inp.last_failure, CAP_TAIL)),
        )
    now = time.strftime("%Y-%m-%d %H:%M %Z (%A)", time.localtime(inp.now))
    out += _section("NOW", f"Current local time: {now}\nAnswer with one JSON move now.")
    return out


def _changes(inp: PromptInput) -> str:
    lines = []
    for c in inp.changed:
        item, old, new = c["item"], c.get("old"), c.get("new")
        if item.startswith("goal:") or item == "playbook":
            what = "appeared" if old is None else "gone" if new is None else "edited"
            lines.append(f"~ {item} {what} (see above)")
        elif old is None:
            lines.append(f"+ {item} appeared: {clip(str(new), CAP_DIFF_VALUE)}")
        elif new is None:
            lines.append(f"- {item} gone (was {clip(str(old), CAP_DIFF_VALUE)})")
        else:
            lines.append(
                f"~ {item}: {clip(str(old), CAP_DIFF_VALUE)} → {clip(str(new), CAP_DIFF_VALUE)}"
            )
    if not lines:
        lines.append(f"(nothing changed; this decide was forced: {inp.forced_by or 'by request'})")
    if inp.flapping:
        lines.append(
            "FLAPPING (signal changed on 5+ beats running; likely noise, fix the sensor rather"
            f" than chase it): {', '.join(inp.flapping)}"
        )
    return escape("\n".join(lines))
