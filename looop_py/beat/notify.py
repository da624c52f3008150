"""`[notify] command`: tell a human, once per event, what needs them.

At the end of every beat (only when a command is configured) looop looks for
events a human should hear about: a new ask or approval, a beat failing
`fail_streak` times in a row, a worker stuck or dead without success, a daily
budget exhausted, a round escalated or stopped by its budget, a loop held on an
approval ask ("held since T: waiting on ask X"). Each event has a
stable key; state/notified.json records the keys already sent, so an event is
notified once however many beats see it. A key is recorded only after the hook
exited 0 for it (at least once): a hook that fails, times out or cannot start
is journaled, counted in state/notify-failing.json (`looop status` shows it) and
tried again by the next beat. The hook runs under `bash -c` with the whole event
as JSON on stdin, and a bounded summary as LOOOP_EVENT_* variables (each at most
ENV_LIMIT characters, the held move left out of LOOOP_EVENT_JSON when it would
not fit: the kernel refuses a larger one), text with every hidden character
spelled out (glyphs.py); in its own process group, under a timeout. A failure
never stops the beat.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from typing import Any

from looop_py import jsonio
from looop_py.asks import mailbox
from looop_py.beat.result import BeatOutcome, BeatResult
from looop_py.errors import FenceLost
from looop_py.glyphs import visible
from looop_py.workdir import environ, journal, shelf
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths, has_entries

KEEP_KEYS = 2000  # the notified record keeps this many newest keys
MAX_PER_BEAT = 10  # events sent by one beat (the rest wait for the next one)
UNSUCCESSFUL_WORKER = ("blocked", "done-with-concerns")


def record_path(paths: Paths) -> Any:
    return paths.state / "notified.json"


def _event(kind: str, key: str, text: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "key": key, "text": text, **fields}


def find_events(wd: WorkDir, result: BeatResult, now: float) -> list[dict[str, Any]]:
    """Every event a human should hear about now (notified or not). Reads only."""
    cfg = wd.config
    events: list[dict[str, Any]] = []
    for ask in mailbox.pending(wd):
        kind = "approval" if ask.kind is mailbox.AskKind.APPROVAL else "ask"
        events.append(
            _event(
                kind,
                f"ask:{ask.id}:{ask.created_at}",
                f"looop {kind} {ask.id} from {ask.asker}: {journal.one_line(ask.prompt, 300)}",
                id=ask.id,
                asker=ask.asker,
                options=list(ask.options),
                hold=ask.hold,
            )
        )
    streak = failing_streak(wd.paths, result)
    if streak >= max(1, cfg.notify.fail_streak):
        first = streak_start(wd.paths, streak)
        events.append(
            _event(
                "beat-failing",
                f"failing:{first}",
                f"looop: {streak} beats failed in a row: {result.reason}",
                streak=streak,
                reason=result.reason,
            )
        )
    reason = result.reason or ""
    if result.outcome is BeatOutcome.HELD and "budget" in reason:
        day = time.strftime("%Y-%m-%d", time.localtime(now))
        events.append(_event("budget-exhausted", f"budget:{day}", f"looop: {reason}"))
    events += _worker_events(wd, now)
    events += _round_events(wd)
    events += _forged_events(wd)
    return events


def _forged_events(wd: WorkDir) -> list[dict[str, Any]]:
    """Approvals (moves/approvals.py) and answers (asks/forged.py) refused as forgeries:
    someone wrote one, so say so."""
    box = wd.shelf
    if box.empty("forged"):
        return []
    out = []
    for name, data in shelf.json_items(box, "forged"):
        if isinstance(data, dict):
            why = str(data.get("why", "?"))
            key = f"forged:{name}:{data.get('at')}"
            if data.get("what") == "answer":
                ask = str(data.get("ask", name))
                text = f"looop: a forged answer to {ask} was refused ({why}); it still waits"
                out.append(_event("answer-forged", key, text, id=ask, why=why))
                continue
            text = f"looop: a forged approval of {name} was refused ({why}); nothing ran"
            out.append(_event("approval-forged", key, text, id=name, why=why))
    return out


def failing_streak(paths: Paths, result: BeatResult) -> int:
    """Failed beats in a row, this one included (locked beats do not break a streak)."""
    if result.outcome is not BeatOutcome.FAILED:
        return 0
    n = 1
    for e in reversed(journal.recent_events(paths, 400)):
        if e.get("event") != "beat" or e.get("outcome") == "locked":
            continue
        if e.get("outcome") != "failed":
            break
        n += 1
    return n


def streak_start(paths: Paths, streak: int) -> str:
    """The ts of the first failed beat of the streak: the streak's stable key."""
    beats = [
        e
        for e in journal.recent_events(paths, 400)
        if e.get("event") == "beat" and e.get("outcome") != "locked"
    ]
    earlier = beats[-(streak - 1) :] if streak > 1 else []
    return str(earlier[0].get("ts")) if earlier else "now"


def _worker_events(wd: WorkDir, now: float) -> list[dict[str, Any]]:
    if not has_entries(wd.paths.sessions):
        return []
    from looop_py.workers import records  # only when sessions/ has entries

    out = []
    for v in records.list_sessions(wd, now):
        status = (v.result or {}).get("status")
        if v.health == "stuck":
            text = f"looop: worker {v.id} is stuck (no output for {round(v.idle_s or 0)} s)"
            out.append(_event("worker-stuck", f"stuck:{v.id}:{v.started_at}", text, id=v.id))
        elif not v.alive and (
            v.lost or v.exit_code not in (0, None) or status in UNSUCCESSFUL_WORKER
        ):
            how = "was lost" if v.lost else f"ended with exit {v.exit_code}, result {status}"
            text = f"looop: worker {v.id} {how}"
            out.append(_event("worker-dead", f"dead:{v.id}:{v.started_at}", text, id=v.id))
    return out


def _round_events(wd: WorkDir) -> list[dict[str, Any]]:
    box = wd.shelf
    if box.empty("rounds"):
        return []
    from looop_py.loops import store  # only when there are rounds

    out = []
    for r in store.rows(box, include_done=False):
        if r.outcome in ("escalated", "budget-exhausted", "failed", "blocked"):
            text = f"looop: round {r.id} of {r.loop} {r.outcome}" + (
                f": {r.error}" if r.error else ""
            )
            out.append(_event(f"round-{r.outcome}", f"round:{r.id}:{r.outcome}", text, id=r.id))
    out += _held_events(wd, [r for r in store.rows(box, include_done=False) if r.live and r.ask])
    return out


def _held_events(wd: WorkDir, waiting: list[Any]) -> list[dict[str, Any]]:
    """A loop whose round waits on an approval ask starts no other round: say so once
    per ask, with how to release it."""
    if not waiting:
        return []
    from looop_py.loops import views  # only when a round waits on a human

    out = []
    for r in waiting:
        line = views.waiting_line(wd, [r])
        if line is None:
            continue
        text = (
            f"looop: loop {r.loop} {line} (its cadence starts no round until"
            f" `looop approve {r.ask}` or `looop deny {r.ask}`)"
        )
        key = f"held:{r.loop}:{r.ask}"
        out.append(_event("loop-held", key, text, id=r.ask, loop=r.loop, round=r.id))
    return out


def notify(wd: WorkDir, result: BeatResult, now: float) -> list[str]:
    """Send each event not notified yet; the keys sent. Never raises."""
    try:
        events = find_events(wd, result, now)
        record = _load(record_path(wd.paths))
        fresh = [e for e in events if e["key"] not in record][:MAX_PER_BEAT]
        failing = _load(failing_path(wd.paths))
        if not fresh and not failing:
            return []
        sent: list[str] = []
        for e in fresh:
            if run_hook(wd, e, now):
                sent.append(e["key"])
                record[e["key"]] = now
                failing.pop(e["key"], None)
            else:
                failing[e["key"]] = failing.get(e["key"], 0) + 1
        if sent:
            kept = sorted(record.items(), key=lambda kv: kv[1])[-KEEP_KEYS:]
            jsonio.write_json(record_path(wd.paths), dict(kept))
        live = {e["key"] for e in events}
        jsonio.write_json(failing_path(wd.paths), {k: n for k, n in failing.items() if k in live})
    except Exception as exc:
        journal.emit(wd, "notify_failed", now, message=repr(exc))
        return []
    return sent


def failing_path(paths: Paths) -> Any:
    """The events whose hook failed, with how many times: retried by every beat."""
    return paths.state / "notify-failing.json"


def failing_count(paths: Paths) -> int:
    """How many events the hook has not yet taken (for `looop status`)."""
    return len(_load(failing_path(paths))) if failing_path(paths).exists() else 0


ENV_LIMIT = 16 * 1024  # characters per LOOOP_EVENT_* variable (Linux refuses over 128 KiB)


def _summary_env(event: dict[str, Any]) -> dict[str, str]:
    """The event as bounded variables: text with hidden characters spelled out."""
    env = {}
    for name in ("kind", "key", "text", "id", "ts", "work_dir"):
        if name in event:
            env[f"LOOOP_EVENT_{name.upper()}"] = _bounded(visible(str(event[name])))
    whole = jsonio.dumps(event).decode()
    if len(whole) > ENV_LIMIT:
        slim = {k: v for k, v in event.items() if k != "hold"}
        whole = jsonio.dumps({**slim, "truncated": "the whole event is on stdin"}).decode()
    env["LOOOP_EVENT_JSON"] = _bounded(whole)
    return env


def _bounded(text: str) -> str:
    return text if len(text) <= ENV_LIMIT else text[: ENV_LIMIT - 1] + "…"


def _load(path: Any) -> dict[str, float]:
    try:
        data = jsonio.read_json(path, {})
    except Exception:
        data = {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def run_hook(wd: WorkDir, event: dict[str, Any], now: float) -> bool:
    """Run the hook for one event; journal and emit a failure. True when it exited 0."""
    cfg = wd.config
    event = {**event, "ts": journal.iso(now), "work_dir": str(wd.paths.root)}
    env = environ.child_env(wd.paths, config=cfg, passthrough=cfg.notify.env)
    env.update(_summary_env(event))
    try:
        fencing = wd.shelf.confirm(f"notify {event['kind']}")  # the fence, at the side effect
    except FenceLost as exc:
        text = f"✗ notification {event['kind']} {event['key']} not sent: {exc.message}"
        journal.write(wd, text, now)
        journal.emit(wd, "notify_fenced", now, kind=event["kind"], token=exc.token)
        return False
    if fencing is not None:
        env.update(fencing.env())
    error: str | None = None
    try:
        proc = subprocess.Popen(
            ["bash", "-c", cfg.notify.command],
            cwd=wd.paths.root,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        error = f"could not start: {exc}"
    else:
        try:
            _, err = proc.communicate(jsonio.dumps(event) + b"\n", timeout=cfg.notify.timeout_s)
            if proc.returncode != 0:
                tail = err.decode("utf-8", "replace").strip()[-300:]
                error = f"exit {proc.returncode}" + (f": {tail}" if tail else "")
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            error = f"timed out after {cfg.notify.timeout_s:g} s"
        except BrokenPipeError:
            proc.wait()
            if proc.returncode != 0:
                error = f"exit {proc.returncode}"
    if error is None:
        journal.emit(wd, "notified", now, kind=event["kind"], key=event["key"])
        return True
    journal.write(wd, f"✗ notify hook failed for {event['kind']} {event['key']}: {error}", now)
    journal.emit(wd, "notify_failed", now, kind=event["kind"], key=event["key"], message=error)
    return False
