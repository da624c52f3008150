"""One beat in one line: what changed, what looop did about it, and where to look next.

    · skipped: world unchanged (xxh3:…), 3/3 sensors ok, 41 ms
    ✓ started worker welcome (1 changed: goal welcome appeared; 3/3 sensors ok, 90 ms)
      → follow: looop worker logs welcome -f          (on the same line)
    ✗ beat failed: … (2/3 sensors ok, 120 ms)

No click here: the pulse door imports this module whenever a beat has something to say.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from looop_py import jsonio
from looop_py.beat import quiet
from looop_py.beat.result import BeatOutcome
from looop_py.cli.output import Note
from looop_py.errors import unreachable

if TYPE_CHECKING:
    from looop_py.beat.result import BeatResult
    from looop_py.world import Change

SHOWN_CHANGES = 3  # changed items named in a beat line; the rest are counted
# A beat that woke with nothing changed, by its forced_by (beat/views.py WAKES says more).
WOKEN_BY = {
    "force": "forced",
    "next-interval": "the decider's timer came due",
    "noop-ttl": "noop TTL passed",
}


def short_hash(h: str | None) -> str:
    return "none" if not h else h[:17] + "…"


def beat_line(r: BeatResult) -> str:
    """One line per beat outcome: skipped, locked, held, failed or decided."""
    ms = f"{r.duration_s * 1000:.0f} ms"
    failed = [x.stem.removeprefix("sensor-") for x in r.readings if not x.ok]
    health = quiet.health(len(r.readings), failed)
    match r.outcome:
        case BeatOutcome.SKIPPED:
            return quiet.skipped_line(short_hash(r.world_hash), health, ms)
        case BeatOutcome.LOCKED if r.held_by:
            return f"· standby: {r.reason}; this host steps aside"
        case BeatOutcome.LOCKED:
            return "· locked: another pulse is running; this one stepped aside"
        case BeatOutcome.HELD:
            return f"· held: {r.reason} ({health}, {ms})"
        case BeatOutcome.FAILED:
            return f"✗ beat failed: {r.reason} ({health}, {ms})"
        case BeatOutcome.DECIDED:
            did, look = move_phrase(r.move, r.decide.get("held_as"))
            why = WOKEN_BY.get(r.forced_by or "", r.forced_by) or changes_clause(r.changed)
            return f"✓ {did} ({why}; {health}, {ms})" + (f" → {look}" if look else "")
        case _:
            unreachable(r.outcome)


def sensor_lines(r: BeatResult) -> list[str]:
    """`pulse -v`: each sensor's status and time, on stderr."""
    return [Note(f"  {x.status:<6} {x.stem:<24} {x.duration_s * 1000:7.1f} ms") for x in r.readings]


def move_phrase(move: Any, held_as: str | None = None) -> tuple[str, str | None]:
    """(what was done, where to look) for a move as the beat result carries it (its JSON)."""
    m = move if isinstance(move, dict) else {}
    action = str(m.get("action") or "?")
    ident = str(next((m[k] for k in ("id", "name", "loop") if m.get(k)), ""))
    if held_as:
        did = f"held {action} {ident}".rstrip() + " for a human"
        return did, f"looop asks; looop approve {held_as}"
    match action:
        case "noop":
            return "nothing to do" + (f": {m['reason']}" if m.get("reason") else ""), None
        case "start_worker":
            return f"started worker {ident}", f"follow: looop worker logs {ident} -f"
        case "kill_worker":
            return f"stopped worker {ident}", "looop workers --all"
        case "start_round":
            return f"started a round of {ident}", "looop rounds"
        case "write_goal":
            return f"wrote goals/{ident}.md", "looop journal"
        case "archive_goal":
            return f"archived goals/{ident}.md", "goals/archive/"
        case "write_sensor":
            return f"wrote sensors/{ident}.sh", "looop sense"
        case "write_playbook":
            return "rewrote PLAYBOOK.md", "looop journal"
        case "write_schedule" | "drop_schedule":
            verb = "set" if action == "write_schedule" else "dropped"
            return f"{verb} timer {ident}", "looop schedules"
        case "run_shell":
            return f"ran `{_clip(str(m.get('cmd', '')), 60)}`", "looop journal"
        case "ask_human":
            return "asked a human", "looop asks"
        case _:
            return f"decided {action} {ident}".rstrip(), "looop journal"


def changes_clause(changed: tuple[Change, ...]) -> str:
    """`2 changed: goal welcome appeared, worker welcome exited 0`."""
    if not changed:
        return "nothing changed"
    said: list[str] = []
    for c in changed:
        said += change_words(c)
    shown = ", ".join(said[:SHOWN_CHANGES])
    more = len(said) - SHOWN_CHANGES
    return f"{len(changed)} changed: {shown}" + (f" (+{more} more)" if more > 0 else "")


def change_words(c: Change) -> list[str]:
    """A changed item in a few words; looop's own probes say what happened inside them."""
    item = c.item.partition("@")[0]  # a host's own reading on a shared backend: NAME@host
    if item == "playbook":
        return [f"PLAYBOOK.md {_kind(c)}"]
    if item.startswith("goal:"):
        return [f"goal {item.removeprefix('goal:')} {_kind(c)}"]
    if item == "snap:sys-sessions":
        return _workers(c) or ["workers"]
    if item == "snap:sys-asks":
        return ["a question for a human" if _grew(c, "pending") else "asks answered"]
    if item == "snap:sys-schedules":
        return _timers(c) or ["schedules"]
    if item.startswith("snap:sys-"):
        return [item.removeprefix("snap:sys-")]
    if item.startswith("snap:sensor-"):
        name = item.removeprefix("snap:sensor-")
        if c.kind != "changed":
            return [f"sensor {name} {_kind(c)}"]
        keyed = _keys_changed(_load(c.old), _load(c.new))
        if keyed is not None:  # `git: dirty false → true`, the key that changed, not a prefix
            return [f"{name}: {key} {old} → {new}" for key, old, new in keyed] or [name]
        return [f"sensor {name} {_clip(c.old or '', 24)} → {_clip(c.new or '', 24)}"]
    return [item]


def _keys_changed(old: Any, new: Any) -> list[tuple[str, str, str]] | None:
    """(key, old, new) for each top-level key whose value differs, both sides JSON objects
    (a key that came or went shows `-`); None when either side is not an object."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return None
    return [
        (key, _shown(old, key), _shown(new, key))
        for key in sorted({*old, *new})
        if old.get(key, _ABSENT) != new.get(key, _ABSENT)
    ]


_ABSENT = object()


def _shown(obj: dict[str, Any], key: str) -> str:
    if key not in obj:
        return "-"
    value = obj[key]
    text = value if isinstance(value, str) else jsonio.dumps(value).decode()
    return _clip(text, 24)


def _timers(c: Change) -> list[str]:
    """Which timers came due, were set or dropped, between two sys-schedules signals (a
    loop's cadence is `loop:NAME` there only while it does not parse)."""
    keyed = _keys_changed(_load(c.old) or {}, _load(c.new) or {})
    words = []
    for name, old, new in keyed or []:
        if new == "-":
            words.append(f"timer {name} dropped")
        elif new == "pending" or old == "-":
            words.append(f"timer {name} set")
        elif new == "invalid":
            words.append(f"timer {name} invalid")
        else:  # a one-shot went due, a recurring one's period or next slot moved on
            words.append(f"timer {name} came due")
    return words


def _kind(c: Change) -> str:
    return {"appeared": "appeared", "gone": "gone"}.get(c.kind, "edited")


def _load(text: str | None) -> Any:
    try:
        return jsonio.loads(text) if text else None
    except jsonio.JSONDecodeError:
        return None


def _workers(c: Change) -> list[str]:
    """Which workers started, ended or changed health between the two sys-sessions signals."""
    before = {r.get("id"): r for r in _load(c.old) or [] if isinstance(r, dict)}
    words = []
    for row in _load(c.new) or []:
        if not isinstance(row, dict) or before.get(row.get("id")) == row:
            continue
        state, code = row.get("state"), row.get("exit_code")
        if state in ("exited", "killed"):
            what = f"{state} {code}" if code is not None else str(state)
        else:
            what = str(row.get("health") or state)
        words.append(f"worker {row.get('id')} {what}")
    return words


def _grew(c: Change, key: str) -> bool:
    return _count(_load(c.new), key) > _count(_load(c.old), key)


def _count(value: Any, key: str) -> int:
    return len(value.get(key) or []) if isinstance(value, dict) else 0


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
