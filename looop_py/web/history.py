"""What happened, for the page: each beat with its move and result, each answered ask with
who answered it, from where and what ran, and a journal search that counts every match.

Plain dicts from the event log, the mailbox and journal.md (no web stack).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from looop_py.asks import mailbox
from looop_py.ids import is_safe_segment
from looop_py.web import data
from looop_py.workdir import shelf
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths

BEATS_PAGE = 50
JOURNAL_PAGE = 200
ANSWERED_SHOWN = 50


def beat_row(e: dict[str, Any]) -> dict[str, Any]:
    """One beat as the beats view shows it: what changed, what was decided, what ran, its
    exit code and output, what the decide cost."""
    stats: dict[str, Any] = e["decide"] if isinstance(e.get("decide"), dict) else {}
    result = stats.get("result") if isinstance(stats.get("result"), dict) else None
    move = e.get("move") if isinstance(e.get("move"), dict) else None
    tokens = sum(
        int(stats[k]) for k in ("input_tokens", "output_tokens") if isinstance(stats.get(k), int)
    )
    return {
        "ts": e.get("ts"),
        "t": e.get("t"),
        "outcome": e.get("outcome"),
        "reason": e.get("reason"),
        "forced": bool(e.get("forced")),
        "changed": [c.get("item") for c in e.get("changed") or [] if isinstance(c, dict)],
        "action": (move or {}).get("action") or (result or {}).get("action"),
        "decided": data.move_summary(move) or (result or {}).get("action"),
        "result": result,
        "held_as": stats.get("held_as"),
        "tokens": tokens or None,
        "cost_usd": stats.get("cost_usd")
        if isinstance(stats.get("cost_usd"), int | float)
        else None,
        "ms": e.get("ms"),
    }


def beats(paths: Paths, page: int = 1, *, woke_only: bool = False) -> dict[str, Any]:
    """Beats newest first, BEATS_PAGE a page; `woke_only` leaves out skipped ones."""
    found = data.beat_events(paths, 0)
    if woke_only:
        found = [e for e in found if e.get("outcome") not in ("skipped", "locked")]
    found.reverse()
    total = len(found)
    page = max(1, page)
    rows = [beat_row(e) for e in found[(page - 1) * BEATS_PAGE : page * BEATS_PAGE]]
    return {
        "beats": rows,
        "total": total,
        "page": page,
        "pages": max(1, -(-total // BEATS_PAGE)),
        "woke_only": woke_only,
        "scanned": "the newest events of events.jsonl (it rotates at 5 MiB)",
    }


def _answer_record(wd: WorkDir, ask_id: str) -> dict[str, Any] | None:
    try:
        got = shelf.read_json(wd.shelf, "answers", ask_id)
    except Exception:
        return {"answer": None, "note": "the answer record is unreadable"}
    return got if isinstance(got, dict) else None


def ask_history(wd: WorkDir, ask_id: str) -> dict[str, Any] | None:
    """One ask, pending or answered: its prompt, what approving runs, its answer (who, when,
    from where, the verdict, what ran and how it went) and the journal lines naming it."""
    if not is_safe_segment(ask_id):
        return None
    try:
        ask = mailbox.get_ask(wd, ask_id)
    except Exception:
        return None
    answer = _answer_record(wd, ask_id)
    state = None
    if answer is None:
        state = mailbox.state_of(wd, ask)[0].value
    lines = search(wd.paths, ask_id, per_page=50)
    return {
        "ask": ask.to_json(),
        "state": state or (answer or {}).get("verdict") or "answered",
        "answer": answer,
        "would_run": data.would_run(ask),
        "journal": lines["lines"],
    }


def answered(wd: WorkDir, n: int = ANSWERED_SHOWN) -> list[dict[str, Any]]:
    """The newest answered asks with their answers, newest first."""
    found: list[tuple[float, str, dict[str, Any]]] = []
    for name, record in shelf.json_items(wd.shelf, "answers"):
        if isinstance(record, dict):
            at = record.get("answered_at")
            found.append((float(at) if isinstance(at, int | float) else 0.0, name, record))
    found.sort(key=lambda r: r[0], reverse=True)
    out = []
    for at, name, record in found[:n]:
        try:
            ask = mailbox.get_ask(wd, name).to_json()
        except Exception:  # an answer whose ask is gone or damaged still shows
            ask = {"id": name, "prompt": None, "kind": None}
        out.append({"ask": ask, "answer": record, "at": at})
    return out


def search(paths: Paths, query: str, page: int = 1, per_page: int = JOURNAL_PAGE) -> dict[str, Any]:
    """Journal lines holding `query` (any case), newest first, a page at a time, with the
    total count: the whole journal is streamed, never a tail of it."""
    q = query.lower()
    page = max(1, page)
    matches: deque[str] = deque(maxlen=page * per_page)  # held: the newest pages only
    total = 0
    try:
        with paths.journal.open("rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if not q or q in line.lower():
                    total += 1
                    matches.append(line)
    except FileNotFoundError:
        pass
    newest_first = list(reversed(matches))
    return {
        "query": query,
        "total": total,
        "page": page,
        "pages": max(1, -(-total // per_page)),
        "per_page": per_page,
        "lines": newest_first[(page - 1) * per_page : page * per_page],
    }
