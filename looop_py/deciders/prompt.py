"""The decide prompt, built from plain data. Pure: same input, same bytes.

Sections run by volatility, so providers' prompt caches hit: first what a
human edits (instructions, constitution, PLAYBOOK, goals sorted by id), then
the readings that did not change since the last decision, oldest first: their
signals, and each detail that stood still since the last prompt (volatility.py
keeps when each last moved). Then the volatile tail: what changed and the
changed signals, pending asks, fairness, the journal, the details that moved
(times, ages, counters), the last shell output and failure, now. Everything
before WHAT CHANGED is byte-identical across decides that saw the same files
and readings; `blocks` cuts the prompt there for cache markers.
Rendering is deterministic (canonical JSON, sorted keys). Interpolated text
can never start a line with `===` or `---`, so a goal, a sensor or an ask
cannot forge a section; every item has its own cap and the whole prompt a
total cap, with visible markers where something was cut.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from looop_py import jsonio
from looop_py.deciders.base import prompt_blocks
from looop_py.deciders.fitting import Fit, Lazy, fit, natural
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
    # (id, body, or what reads it: only the goals that fit the prompt are read)
    goals: Sequence[tuple[str, str | Callable[[], str]]]
    snapshots: Sequence[tuple[str, Any]]  # (stem, {signal, detail})
    asks: Sequence[dict[str, Any]] = ()  # {id, asker, kind, age_s, prompt, live, state, why}
    goal_ages: dict[str, float | None] = field(default_factory=dict)  # id → age in s, or None
    journal: Sequence[str] = ()
    changed: Sequence[dict[str, Any]] = ()  # {item, old, new}
    forced_by: str | None = None  # why a decide happened with nothing changed
    flapping: Sequence[str] = ()
    last_shell: dict[str, Any] | None = None  # {cmd, exit_code, output}
    last_failure: str | None = None
    # "signal:<stem>" / "detail:<stem>" → when it last changed between prompts (volatility.py)
    since: Mapping[str, float] = field(default_factory=dict)


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


def _signal_and_detail(snap: Any) -> tuple[Any, Any]:
    """A snapshot's signal and its detail (None when it has none worth showing)."""
    if isinstance(snap, dict) and "signal" in snap:
        detail = snap.get("detail")
        return snap["signal"], detail if detail not in (None, {}, []) else None
    return snap, None


def _reading(stem: str, value: Any, mark: str = "") -> str:
    return f"--- {stem}{mark}\n{escape(clip(jsonio.canonical(value).decode(), CAP_READING))}"


DETAIL = " (detail)"  # after the stem in a detail's header line


def build(inp: PromptInput, total_cap: int = TOTAL_CAP) -> str:
    """The prompt, never over `total_cap` bytes.

    Every section has a budget. When space is short it is handed out in this
    order: the instructions, looop's own probes (sys-*), what changed (itself
    capped, with a count of what it left out), the readings' details, pending
    asks, the last failure and shell output, the journal, the PLAYBOOK, and
    last the bulk: sensor readings and goals, which share what is left. What
    was cut is named in its section and again under NOW; the sections keep
    their order, stable part first (see `blocks`).
    """
    head = _section("INSTRUCTIONS", INSTRUCTIONS.format(catalogue=union.catalogue()))
    head += _section("CONSTITUTION (immutable; overrides the PLAYBOOK)", CONSTITUTION)
    room = total_cap - len(head.encode()) - RESERVE_NOW

    def share(fraction: float) -> int:
        return max(0, min(room, int(total_cap * fraction)))

    changed_snaps = {
        str(c["item"]).removeprefix("snap:").partition("@")[0]  # sys-sessions@host: shared
        for c in inp.changed
        if str(c["item"]).startswith("snap:")
    }
    split = {stem: _signal_and_detail(snap) for stem, snap in inp.snapshots}
    stems = sorted(split)
    sys_stems = [s for s in stems if _is_sys(s)]
    # looop's own probes: their signals always show, the unchanged ones first.
    sys_order = [s for s in sys_stems if s not in changed_snaps]
    sys_order += [s for s in sys_stems if s in changed_snaps]
    sys_fit = fit([_reading(s, split[s][0]) for s in sys_order], share(SHARE_SYS), "looop probes")
    room -= sys_fit.size()
    changes = _change_lines(inp)
    changes_fit = fit(changes, share(SHARE_CHANGED), "changes")
    room -= changes_fit.size() + 512
    sensor_stems = [s for s in stems if not _is_sys(s)]
    details = [
        _reading(s, split[s][1], DETAIL)
        for s in (*sys_stems, *sensor_stems)
        if split[s][1] is not None
    ]
    details_fit = fit(details, share(SHARE_DETAIL), "details")
    room -= details_fit.size()
    extra = _extra_sections(inp, share(SHARE_EXTRA))
    room -= len(extra.encode())
    asks_fit = fit(_ask_entries(inp), share(SHARE_ASKS), "pending asks")
    room -= asks_fit.size()
    journal_fit = fit(
        [escape(clip(line, CAP_JOURNAL_LINE)) for line in inp.journal],
        share(SHARE_JOURNAL),
        "journal lines",
    )
    room -= journal_fit.size()
    if inp.playbook is None:
        playbook = "(no PLAYBOOK.md)"
    else:
        playbook = escape(clip(inp.playbook, max(0, min(CAP_PLAYBOOK, room - 200))))
    room -= len(playbook.encode()) + 64

    # The bulk: sensor readings and goals share the rest, each taking what the other leaves.
    order = [s for s in sensor_stems if s not in changed_snaps]
    order += [s for s in sensor_stems if s in changed_snaps]  # changed ones go first when cut
    readings = [_reading(s, split[s][0]) for s in order]
    goal_rows = sorted(inp.goals, key=lambda row: row[0])
    goals = Lazy(len(goal_rows), lambda i: _goal_entry(*goal_rows[i]))
    changed_goals = {c["item"].removeprefix("goal:") for c in inp.changed}
    keep_goals = [i for i, (gid, _) in enumerate(goal_rows) if gid in changed_goals]
    keep_readings = list(range(len(order) - len(changed_snaps & set(order)), len(order)))
    half = max(0, room) // 2  # past it, how much more the goals would take does not matter
    room_readings = max(half, room - natural(goals, enough=room - half))
    readings_fit = fit(readings, room_readings, "readings", keep=keep_readings)
    goals_fit = fit(goals, max(0, room - readings_fit.size()), "goals", keep=keep_goals)

    cuts = [
        f"{f.left_out} of {len(f.kept) + f.left_out} {f.noun}"
        for f in (goals_fit, readings_fit, sys_fit, details_fit, asks_fit, journal_fit, changes_fit)
        if f.left_out
    ]
    if inp.playbook is not None and playbook.endswith("more bytes not shown]"):
        cuts.append("the end of the PLAYBOOK")
    stable_sys, changed_sys = _part(sys_fit, changed_snaps)
    stable_rd, changed_rd = _part(readings_fit, changed_snaps)
    # A detail that stood still since the last prompt joins the stable part; all of it
    # runs oldest first, so what changed most recently sits last (volatility.py).
    steady = {i for i, e in enumerate(details_fit.kept) if _still(inp, _key(e))}
    stable = sorted(
        [*stable_sys, *stable_rd, *(details_fit.kept[i] for i in sorted(steady))],
        key=lambda e: _rank(inp, e),
    )
    moving = Fit(
        [e for i, e in enumerate(details_fit.kept) if i not in steady],
        details_fit.left_out,
        "details",
    )
    text = (
        head
        + _section("PLAYBOOK", playbook)
        + _section("GOALS", goals_fit.body())
        + _section(READINGS_TITLE, _readings_body(stable, sys_fit, readings_fit))
        + _section(CHANGED_TITLE, changes_fit.body() if changes else "")
        + (
            _section("CHANGED READINGS (signals now)", "\n".join([*changed_sys, *changed_rd]))
            if changed_sys or changed_rd
            else ""
        )
        + _section("PENDING ASKS (waiting on a human; not yours to answer)", asks_fit.body())
        + _fairness(inp)
        + _section("RECENT JOURNAL", journal_fit.body() if inp.journal else "(empty)")
        + _section("READING DETAILS (ages, times and counters; never a wake)", moving.body())
        + extra
        + _now(inp, total_cap, cuts)
    )
    return _hard_cap(text, total_cap)


def blocks(text: str) -> list[str]:
    """The prompt in three parts for providers' cache markers: policy (instructions …
    goals), unchanged readings, and the volatile rest. Joined, they are the prompt."""
    return prompt_blocks(text)  # it cuts at CACHE_CUTS, the starts of these two titles


RESERVE_NOW = 1024  # the NOW section and the note naming what was cut
SHARE_SYS = 0.20  # looop's own probes: sessions, claims, asks, rounds, schedules
SHARE_CHANGED = 0.20
SHARE_DETAIL = 0.10  # the readings' details: ages, times, counters (sys-* first)
SHARE_EXTRA = 0.05  # the last run_shell output and the last failure
SHARE_ASKS = 0.10
SHARE_JOURNAL = 0.05


def _is_sys(stem: str) -> bool:
    return stem.startswith("sys-")


def _goal_entry(goal_id: str, body: str | Callable[[], str]) -> str:
    text = body if isinstance(body, str) else body()
    return f"--- goals/{goal_id}.md\n{escape(clip(text, CAP_GOAL))}"


READINGS_TITLE = "SENSOR READINGS (unchanged since your last decision; oldest first)"
CHANGED_TITLE = "WHAT CHANGED (since your last decision; computed by looop)"


def _stem(entry: str) -> str:
    return entry.partition("\n")[0].removeprefix("--- ").removesuffix(DETAIL)


def _key(entry: str) -> str:
    """`signal:<stem>` or `detail:<stem>`, as volatility.py names the parts."""
    head = entry.partition("\n")[0]
    return ("detail:" if head.endswith(DETAIL) else "signal:") + _stem(entry)


def _still(inp: PromptInput, key: str) -> bool:
    """Whether this part is what the last prompt showed (unknown counts as changed)."""
    return key in inp.since and inp.since[key] < inp.now


def _rank(inp: PromptInput, entry: str) -> tuple[float, bool, str, bool]:
    """Oldest first; then looop's probes before sensors, by stem, a signal before its detail."""
    stem, key = _stem(entry), _key(entry)
    return (inp.since.get(key, 0.0), not _is_sys(stem), stem, key.startswith("detail:"))


def _part(fit: Fit, changed: set[str]) -> tuple[list[str], list[str]]:
    """The kept entries whose signal did not change, and those whose signal did."""
    same = [e for e in fit.kept if _stem(e) not in changed]
    return same, [e for e in fit.kept if _stem(e) in changed]


def _readings_body(entries: list[str], *fits: Fit) -> str:
    """The unchanged readings, looop's probes first; each list says what it left out."""
    lines = list(entries)
    for f in fits:
        if f.left_out:
            lines.append(f"(section truncated: {f.left_out} more {f.noun} not shown)")
    return "\n".join(lines) if lines else "(no readings)"


def _hard_cap(text: str, total_cap: int) -> str:
    """The last guard: a prompt over its cap is cut, visibly, at the cap."""
    data = text.encode("utf-8")
    if len(data) <= total_cap:
        return text
    marker = "\n[… cut at the prompt cap]\n"
    keep = max(0, total_cap - len(marker.encode()))
    return data[:keep].decode("utf-8", "ignore") + marker


def _ask_state(a: dict[str, Any]) -> str:
    state = a.get("state") or ("pending" if a.get("live", True) else "stranded")
    if state == "pending":
        return "LIVE: blocked on a human"
    why = a.get("why") or ("its worker is dead" if state == "stranded" else "")
    return f"{str(state).upper()}: {escape(clip(str(why), 200))}"


def _ask_entries(inp: PromptInput) -> list[str]:
    return [
        f"--- {a['id']} ({a['kind']} from {a['asker']}, {_age(a.get('age_s'))}, {_ask_state(a)})"
        f"\n{escape(clip(str(a['prompt']), CAP_ASK))}"
        for a in inp.asks
    ]


def _fairness(inp: PromptInput) -> str:
    if not inp.goal_ages:
        return ""
    gid = min(inp.goal_ages, key=lambda g: (inp.goal_ages[g] is not None, -(inp.goal_ages[g] or 0)))
    return _section(
        "FAIRNESS (computed by looop)",
        f"Most neglected goal: {escape(clip(gid, 200))} (last acted on: "
        f"{_age(inp.goal_ages[gid])}). Prefer it this beat unless something more urgent needs"
        " you; otherwise say in `journal` why.",
    )


def _extra_sections(inp: PromptInput, budget: int) -> str:
    out = ""
    each = max(0, budget // 2 - 200)
    if inp.last_shell:
        s = inp.last_shell
        out += _section(
            "RUN_SHELL OUTPUT (your previous move; shown once)",
            f"$ {escape(clip(str(s.get('cmd')), 500))}\nexit {s.get('exit_code')}\n"
            + escape(clip(str(s.get("output", "")), min(CAP_TAIL, each))),
        )
    if inp.last_failure:
        out += _section(
            "LAST FAILURE (your previous attempt; do not repeat it)",
            escape(clip(inp.last_failure, min(CAP_TAIL, each))),
        )
    return out


def _now(inp: PromptInput, total_cap: int, cuts: list[str]) -> str:
    now = time.strftime("%Y-%m-%d %H:%M %Z (%A)", time.localtime(inp.now))
    body = f"Current local time: {now}\n"
    if cuts:
        body += (
            f"This prompt was cut to fit its {total_cap}-byte cap; not shown: "
            + clip(", ".join(cuts), 400)
            + ".\n"
        )
    return _section("NOW", body + "Answer with one JSON move now.")


def _change_lines(inp: PromptInput) -> list[str]:
    """What changed, looop's own probes first, then sensors, then policy files."""

    def rank(c: dict[str, Any]) -> int:
        item = str(c["item"])
        return 0 if item.startswith("snap:sys-") else 1 if item.startswith("snap:") else 2

    lines = []
    for c in sorted(inp.changed, key=rank):
        item, old, new = escape(clip(str(c["item"]), 300)), c.get("old"), c.get("new")
        if item.startswith("goal:") or item == "playbook":
            what = "appeared" if old is None else "gone" if new is None else "edited"
            lines.append(f"~ {item} {what} (see above)")
        elif old is None:
            lines.append(f"+ {item} appeared: {escape(clip(str(new), CAP_DIFF_VALUE))}")
        elif new is None:
            lines.append(f"- {item} gone (was {escape(clip(str(old), CAP_DIFF_VALUE))})")
        else:
            lines.append(
                f"~ {item}: {escape(clip(str(old), CAP_DIFF_VALUE))}"
                f" → {escape(clip(str(new), CAP_DIFF_VALUE))}"
            )
    if not lines:
        lines.append(f"(nothing changed; this decide was forced: {inp.forced_by or 'by request'})")
    if inp.flapping:
        lines.insert(
            0,
            "FLAPPING (signal changed on 5+ beats running; likely noise, fix the sensor rather"
            f" than chase it): {escape(clip(', '.join(inp.flapping), 2000))}",
        )
    return lines
