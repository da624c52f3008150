"""The CLI's views of the loop's state, turned into human lines (or the object `--json`
prints); the work in play (asks, workers, claims) is in worklines.py.

No click, no printing: each function returns lines; a `Note` goes to stderr (not for a
script reading stdout). The pulse door imports this only when a beat has something to say.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from looop_py.cli.output import Note
from looop_py.logfile import iso

if TYPE_CHECKING:
    from looop_py.beat.preview import Preview
    from looop_py.beat.prune import Pruned
    from looop_py.beat.views import LimitsView, StatusView, WhyView
    from looop_py.deciders.check import DeciderCheck
    from looop_py.engine.spec import LoopSpec
    from looop_py.loops.store import RoundRow
    from looop_py.loops.views import LoopsView
    from looop_py.world import Change

    Lines = list[str]


# -- small pieces --------------------------------------------------------------------


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def compact(value: Any, limit: int = 100) -> str:
    from looop_py import jsonio

    text = jsonio.canonical(value).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the beat: pulse, sense, status, why, journal ---------------------------------------


def sense_lines(view: Preview) -> Lines:
    failed = {f"sensor-{name}" for name in view.failed}
    lines: Lines = [
        f"{'✗' if stem in failed else '·'} {stem}: {compact(snap.get('signal'))}"
        for stem, snap in view.world.snapshots.items()
    ]
    if not view.changed:
        return [*lines, "would skip: the world is unchanged since the last decision"]
    lines.append(f"would wake the decider: {len(view.changed)} item(s) changed")
    return lines + [change_line(c) for c in view.changed]


def status_lines(view: StatusView) -> Lines:
    last, s = view.last_beat, view.sensors
    lines = [
        f"work dir    {view.work_dir}",
        f"pulse       {'running now' if view.pulse_running else 'idle'}",
        *_shared_lines(view),
        f"last beat   {last.ts} {last.outcome or '?'} ({last.ms} ms)"
        if last
        else "last beat   none yet (run `looop pulse`)",
        f"world hash  {view.world_hash or 'none committed yet'}",
        f"sensors     {len(s.ok)} ok, {len(s.failed)} failed"
        + (f": {', '.join(s.failed)}" if s.failed else ""),
        f"goals       {view.goals}   sessions {view.sessions}   claims {view.claims}",
    ]
    for loop, why in (view.held_loops or {}).items():
        lines.append(f"loop held   {loop}: {why}")
    if view.committed_error:
        lines.append(Note(f"✗ {view.committed_error}"))
    if view.limits is None:
        return [*lines, "limits      unknown: the shared ledger is out of reach"]
    if view.notify_failing:
        lines.append(
            Note(
                f"✗ notify: {view.notify_failing} event(s) not delivered: the [notify] hook"
                " failed (see `looop journal`); every beat tries again"
            )
        )
    return lines + limits_lines(view.limits)


def _shared_lines(view: StatusView) -> Lines:
    s = view.shared
    if s is None:
        return []
    if s.error is not None:
        d = view.degraded
        age = "never mirrored" if d is None or d.mirror_age_s is None else _age(d.mirror_age_s)
        since = f"; beats cut off since {iso(d.since)}" if d and d.since else ""
        return [
            f"shared      {s.backend} as host {s.host}",
            Note(f"✗ {s.error}"),
            Note(f"⚠ degraded: the world below is this host's local mirror, stale ({age}){since}"),
        ]
    since = f" since {iso(s.pulse_since)}" if s.pulse_since else ""
    pulse = f"held by {s.pulse_host}{since} (epoch {s.pulse_epoch})" if s.pulse_host else "free"
    return [f"shared      {s.backend} as host {s.host}; the shared pulse is {pulse}"]


def limits_lines(lim: LimitsView) -> Lines:
    tokens = f"{lim.tokens_today}" + (f" of {lim.daily_tokens}" if lim.daily_tokens else "")
    usd = f"${lim.usd_today:.4f}" + (f" of ${lim.daily_usd:.2f}" if lim.daily_usd else "")
    lines: Lines = [
        f"decides     {lim.decides_last_hour} in the last hour"
        f" (cap {lim.decides_per_hour or 'no cap'})",
        f"spend today {tokens} tokens, {usd}",
    ]
    if lim.by_source:
        parts = [
            f"{src} {row['tokens']} tokens ${row['usd']:.4f}" for src, row in lim.by_source.items()
        ]
        lines.append(f"  by source {' · '.join(parts)}")
    if lim.by_runtime:
        parts = [
            f"{rt} {row['tokens']} tokens ${row['usd']:.4f}" for rt, row in lim.by_runtime.items()
        ]
        lines.append(f"  by runtime {' · '.join(parts)}")
    if lim.unpriced:
        parts = [f"{rt} {n} tokens" for rt, n in lim.unpriced.items()]
        lines.append(f"  no price  {' · '.join(parts)} (not in the dollars above)")
    if lim.cache_hit_ratio is not None:
        lines.append(f"cache hits  {lim.cache_hit_ratio:.0%} of today's prompt tokens")
    if b := lim.backoff:
        when = f"retry in {b.retry_in_s}s"
        lines.append(f"backoff     {b.fails} failure(s) in a row, {when}: {b.reason}")
    if lim.flapping:
        lines.append(f"flapping    {', '.join(lim.flapping)}")
    if lim.pending_asks:
        lines.append(f"asks        {lim.pending_asks} waiting on a human (looop asks)")
    if lim.blocked:
        lines.append(f"held        the decider will not be called now: {lim.blocked}")
    return lines


def change_line(c: Change) -> str:
    """One changed item, old → new; an absent side is named, never printed as None."""
    match c.kind:
        case "appeared":
            return f"  + {c.item} appeared: {c.new}"
        case "gone":
            return f"  - {c.item} gone (was {c.old})"
        case _:
            return f"  ~ {c.item}: {c.old} → {c.new}"


def why_lines(view: WhyView) -> Lines:
    last = view.last
    lines = [f"last beat {last.ts}: {last.outcome or '?'}"] if last and last.ts else []
    lines.append(view.explanation)
    if view.limits and view.limits.blocked:
        lines.append(f"right now: {view.limits.blocked}")
    return lines + [change_line(c) for c in view.changed]


def journal_lines(tail: list[str]) -> Lines:
    return tail or [Note("(the journal is empty: no move has been made yet)")]


# -- decider, loops, rounds, patterns ------------------------------------------------------


def decider_test_lines(view: DeciderCheck) -> Lines:
    lines = [f"backend     {view.backend}", f"latency     {view.ms} ms"]
    usage = view.usage
    if usage is None:
        lines.append("usage       not reported (unmetered)")
    else:
        cost = usage.cost_usd
        lines.append(
            f"usage       {usage.input_tokens} in / {usage.output_tokens} out"
            f" tokens, {'cost unknown' if cost is None else f'${cost:.6f}'}"
        )
    if view.error:
        lines.append(f"error       {view.error}")
        return lines + ([f"            → {view.hint}"] if view.hint else [])
    lines.append(f"move        {compact(view.move, 200)}")
    return [*lines, f"invalid     {view.invalid}" if view.invalid else "valid       yes"]


def loops_lines(view: LoopsView) -> Lines:
    lines: Lines = []
    if not view.loops and not view.errors:
        lines.append(
            "no loops yet: `looop patterns` lists ready-made ones, `looop new NAME` writes one"
        )
    for lp in view.loops:
        nxt = "held: budget" if lp.held else lp.next_fire or "-"
        if lp.waiting:
            nxt = "held: ask"
        lines.append(
            f"{lp.name:<22} {lp.level:<14} {lp.cadence:<18} next {nxt:<20}"
            f" last {lp.last_outcome or '-':<16} {lp.tokens} tokens"
        )
        if lp.waiting:
            lines.append(f"  {lp.waiting} (looop approve or deny it)")
    return lines + [Note(f"✗ goals/{goal}.md: {err}") for goal, err in view.errors.items()]


def rounds_lines(rows: list[RoundRow], *, all_: bool) -> Lines:
    lines = [] if rows else ["no live rounds" + ("" if all_ else " (--all shows finished ones)")]
    for r in rows:
        lines.append(f"{r.id:<40} {r.phase:<18} {r.outcome or '-':<16} {r.tokens} tokens")
        if r.ask:
            lines.append(f"    waiting on a human: looop approve {r.ask}  /  looop deny {r.ask}")
    return lines


def patterns_lines(specs: Iterable[LoopSpec]) -> Lines:
    lines: Lines = []
    for spec in specs:
        lines.append(
            f"{spec.name:<20} {spec.level.label:<14} {spec.cadence:<12} {spec.action_kind:<12}"
        )
        lines.append(f"    {spec.intent}")
    return lines


def new_goal_json(spec: LoopSpec, pattern: str) -> dict[str, Any]:
    return {"goal": f"goals/{spec.name}.md", "pattern": pattern, **spec.to_dict()}


def new_goal_lines(spec: LoopSpec) -> Lines:
    return [
        f"wrote goals/{spec.name}.md ({spec.level.label}, {spec.cadence or 'on demand'});"
        " edit it, then",
        f"try it: looop run {spec.name}",
    ]


def topic_summary(page: str) -> str:
    """A reference page's first line, after its `# Topic: ` lead."""
    return page.splitlines()[0].partition(": ")[2]


def topics_lines(pages: dict[str, str]) -> Lines:
    """`looop help`: each topic with the first line of its page."""
    lines = ["looop help TOPIC: the manual. Topics:"]
    lines += [f"  {name:<14} {topic_summary(text)}" for name, text in pages.items()]
    return [*lines, "", "Every command also has --help with an example: looop COMMAND --help"]


# -- schedules and prune --------------------------------------------------------------------


def schedules_json(probe: dict[str, Any]) -> dict[str, Any]:
    """The sys-schedules probe as one row per timer: name, its signal, and its detail."""
    return {
        "schedules": [
            {"name": name, "signal": signal, **probe["detail"].get(name, {})}
            for name, signal in sorted(probe["signal"].items())
        ]
    }


def schedules_lines(probe: dict[str, Any]) -> Lines:
    rows = schedules_json(probe)["schedules"]
    lines = [f"{'NAME':<24} {'KIND':<6} {'WHEN':<20} STATE"] if rows else ["no schedules"]
    for row in rows:
        kind = row.get("kind") or "?"
        when = {"once": "once", "every": f"every {age(row.get('every_s'))}"}
        when["cron"] = f"cron {row.get('cron')}"
        due_in = row.get("due_in_s", row.get("next_due_in_s"))
        if row["signal"] == "invalid":
            state = f"invalid: {row.get('error') or compact(row.get('record'))}"
        elif row["signal"] == "due":
            state = "due now"
        else:
            state = f"next in {age(max(0, due_in or 0))}"
        lines.append(f"{row['name']:<24} {kind:<6} {when.get(kind, '-'):<20} {state}")
    return lines


def dropped_lines(name: str) -> Lines:
    return [f"dropped schedule {name}"]


def prune_lines(result: Pruned) -> Lines:
    gone, moved = ("would remove", "would archive") if result.dry_run else ("removed", "archived")
    lines = [f"{gone} session {s}" for s in result.sessions_removed]
    lines += [f"{gone} run {r}" for r in result.runs_removed]
    lines += [f"{moved} round {r} to rounds/done/" for r in result.rounds_archived]
    lines += [f"{gone} {e.kind} {e.name} ({e.why})" for e in result.history_removed]
    lines += [_event_line(e) for e in result.events if e["event"] != "session_pruned"]
    return lines or [f"nothing {'would go' if result.dry_run else 'to prune'}"]


def _event_line(e: dict[str, Any]) -> str:
    """One housekeeping event (the ones the beat writes to events.jsonl) in words."""
    what = {
        "worker_lost": "worker {id} lost: its supervisor vanished",
        "worker_verified": "verified worker {id}: {verdict}",
        "worker_ended": "settled worker {id}: {state}, exit {exit_code}",
        "claim_reaped": "reaped claim {name}: {reason}",
    }.get(e["event"])
    return what.format_map(defaultdict(lambda: "?", e)) if what else f"{e['event']}: {compact(e)}"


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s old"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min old"
    return f"{seconds / 3600:.1f} h old"
