"""The pages as HTML strings (pure: the dicts of web/data.py in, markup out; no web stack).

Every interpolated value goes through `e()` (html.escape). `csrf` is the form
token; None renders a page without any form (read-only mode, `looop report`).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from looop_py.web import svg
from looop_py.web.markup import (
    Markup,
    clip,
    e,
    form,
    layout,
    link,
    outcome,
    pretty,
    short,
    table,
    when,
    when_iso,
    would_run,
)


def overview(d: dict[str, Any], *, links: bool = True) -> str:
    st = d["status"]
    lim = st["limits"]
    counts = d["counts"]
    span = "24 h" if d["days"] == 1 else f"{d['days']} days"
    ratio = d["wake_ratio"]
    last = st.get("last_beat") or {}
    sensors = st["sensors"]
    cards = [
        (
            f"beats, last {span}",
            f'<div class="big">{sum(counts.values())}</div>'
            + " · ".join(f'<span class="o-{k}">{v} {k}</span>' for k, v in counts.items()),
        ),
        (
            "wake ratio",
            f'<div class="big">{"—" if ratio is None else f"{ratio:.0%}"}</div>'
            "beats that woke the decider among those that ran",
        ),
        (
            "last beat",
            f'<div class="big o-{e(last.get("outcome"))}">{e(last.get("outcome") or "none")}</div>'
            f"{when_iso(last.get('ts'))} {e(last.get('reason') or '')}",
        ),
        (
            "sensors",
            f'<div class="big"><span class="ok">{len(sensors["ok"])} ok</span> · '
            f'<span class="{"bad" if sensors["failed"] else "muted"}">'
            f"{len(sensors['failed'])} failed</span></div>{e(', '.join(sensors['failed']))}",
        ),
        (
            "spend today",
            f'<div class="big">{lim["tokens_today"]} tokens · ${lim["usd_today"]:.4f}</div>'
            f"daily budget: {lim['daily_tokens'] or 'no'} tokens, "
            f"{_usd(lim['daily_usd']) if lim['daily_usd'] else 'no'} USD"
            + "".join(
                f'<div class="source">{e(src)}: {row["tokens"]} tokens · ${row["usd"]:.4f}</div>'
                for src, row in (lim.get("by_source") or {}).items()
            )
            + (
                f"<div>cache hits: {lim['cache_hit_ratio']:.0%}</div>"
                if lim.get("cache_hit_ratio") is not None
                else ""
            )
            + (f'<div class="bad">held: {e(lim["blocked"])}</div>' if lim["blocked"] else ""),
        ),
        (
            "pending asks",
            f'<div class="big">{len(d["asks"])}</div>'
            + ('<a href="/asks">answer them</a>' if d["asks"] and links else ""),
        ),
    ]
    body = '<div class="cards">' + "".join(
        f'<div class="card"><div class="muted">{t}</div>{c}</div>' for t, c in cards
    )
    other = '<a href="/?days=7">7 days</a>' if d["days"] == 1 else '<a href="/">24 h</a>'
    body += f"</div><h2>Beats over the last {span}</h2>" + (f"<p>{other}</p>" if links else "")
    chart = svg.timeline(d["beats"], time.time(), 24 * d["days"], 1 if d["days"] == 1 else 6)
    body += f'<div class="card" id="timeline">{chart}</div>'
    budget = d["budget"]
    body += "<h2>Spend per day</h2>"
    body += '<p class="muted">decides, loop rounds and workers, as the daily budget counts them'
    if any(day.get("sources") == "decider" and day.get("decides") for day in d["spend"]):
        body += "; a day before the ledger kept history shows its decides only"
    body += '</p><div class="cards">'
    body += f'<div class="card">tokens{svg.spend_bars(d["spend"], "tokens", budget["daily_tokens"], "tokens")}</div>'  # noqa: E501
    body += f'<div class="card">USD{svg.spend_bars(d["spend"], "usd", budget["daily_usd"], "USD")}</div></div>'  # noqa: E501
    workers = d["workers"]["workers"]
    body += f"<h2>Live workers ({d['workers']['live']} of {d['workers']['max_live']})</h2>"
    body += table(
        ["id", "health", "state", "runtime", "uptime"],
        [
            [
                link(f"/workers/{w['id']}", w["id"], links),
                health_word(w),
                w["state"],
                w.get("runtime"),
                _secs(w.get("uptime_s")),
            ]
            for w in workers
        ],
    )
    body += "<h2>Live rounds</h2>" + _rounds(d["rounds"], links)
    body += "<h2>Recent beats</h2>" + table(
        ["when", "outcome", "decided"],
        [
            [
                link(f"/beats/{quote(str(b['ts']))}", b["ts"], links, b.get("t")),
                outcome(b["outcome"]),
                b.get("decided") or "",
            ]
            for b in reversed(d["beats"][-15:])
        ],
    )
    if links:
        body += '<p><a href="/beats">every beat, with what it decided and how it went</a></p>'
    return pending_first(d["asks"], links) + body


def pending_first(pending: list[dict[str, Any]], links: bool) -> str:
    """The asks waiting for a human, at the top of the overview (first on a phone too)."""
    if not pending:
        return ""
    items = "".join(
        f"<li>{link('/asks/' + str(a['id']), a['id'], links)} "
        f'<span class="muted">{e(a["kind"])}</span> {e(clip(a["prompt"], 120))}</li>'
        for a in pending
    )
    return (
        f'<section id="pending"><h2>Waiting for you ({len(pending)})</h2><ul>{items}</ul></section>'
    )


def health_word(w: dict[str, Any]) -> Markup:
    """A worker's health in words that tell a finished worker from one that died."""
    if w.get("alive"):
        word = str(w.get("health"))
    elif w.get("lost"):
        word = "died (its supervisor was gone)"
    elif w.get("state") == "killed":
        word = "died (killed)"
    elif w.get("exit_code") == 0:
        word = "finished ok"
    elif isinstance(code := w.get("exit_code"), int):
        word = f"died (signal {code - 128})" if code > 128 else f"failed (exit {code})"
    else:
        word = "ended"
    return Markup(f'<span class="h-{e(word.split()[0])}">{e(word)}</span>')


def _usd(v: float) -> str:
    return f"${v:.2f}"


def _secs(s: Any) -> str:
    return f"{round(s)} s" if isinstance(s, int | float) else "—"


def _rounds(rounds: list[dict[str, Any]], links: bool = True) -> str:
    return table(
        ["round", "loop", "phase", "outcome", "tokens", "waits on"],
        [
            [
                link(f"/rounds/{r['id']}", r["id"], links),
                link(f"/goals/{r['loop']}", r["loop"], links) if r.get("loop") else "",
                r["phase"],
                r.get("outcome"),
                r.get("tokens"),
                link(f"/asks/{r['ask']}", r["ask"], links) if r.get("ask") else "",
            ]
            for r in rounds
        ],
    )


def beat(d: dict[str, Any]) -> str:
    b = d["beat"]
    body = (
        f"<p>{outcome(b.get('outcome'))} · {when_iso(b.get('ts'))} · {e(b.get('ms'))} ms · "
        f"{e(d['explanation'])}</p>"
    )
    if b.get("reason"):
        body += f'<p class="bad">reason: {e(b["reason"])}</p>'
    body += "<h2>What changed</h2>" + table(
        ["item", "old", "new"],
        [[c.get("item"), short(c.get("old")), short(c.get("new"))] for c in b.get("changed", [])],
    )
    if b.get("move"):
        body += f"<h2>Move</h2><pre>{e(pretty(b['move']))}</pre>"
    if d["run_id"]:
        body += f"<h2>Decide archive runs/{e(d['run_id'])}/</h2>"
        stats = b.get("decide") if isinstance(b.get("decide"), dict) else {}
        if "prompt.md" not in d["run"] and stats.get("prompt_bytes") == 0:
            body += (
                f'<p class="muted" id="no-prompt">no prompt.md: the {e(stats.get("backend"))}'
                " decider reads no prompt, so none was built</p>"
            )
        for name, text in d["run"].items():
            body += f"<h3>{e(name)}</h3><pre>{e(text)}</pre>"
    return body


def asks(d: dict[str, Any], csrf: str | None) -> str:
    if not d["asks"]:
        return '<p class="muted" id="no-asks">no pending asks</p>'
    body = ""
    for a in d["asks"]:
        aid = a["id"]
        body += (
            f'<div class="card ask" id="ask-{e(aid)}"><b><a href="/asks/{e(aid)}">{e(aid)}</a></b> '
            f'<span class="muted">{e(a["kind"])} from {e(a["asker"])}, {a["age_s"]} s ago</span>'
            + (
                f' <span class="bad">{e(a["state"])}: {e(a.get("why"))}</span>'
                if a.get("state", "pending") != "pending"
                else ""
            )
            + f"<pre>{e(a['prompt'])}</pre>"
        )
        run = a.get("would_run")
        if run is not None:
            body += would_run(run, "Approving runs")
            if csrf is not None:  # approving takes a second step that names what runs
                body += (
                    f'<a class="button approve" id="approve-{e(aid)}" '
                    f'href="/asks/{e(aid)}/confirm">approve…</a>'
                )
            reason = '<input name="reason" placeholder="reason (optional)">'
            body += " " + form(
                f"/asks/{aid}/deny", csrf, "deny", reason, name=f"deny-{aid}", cls="danger"
            )
        else:
            if a.get("options"):
                field = (
                    '<select name="answer">'
                    + "".join(f"<option>{e(o)}</option>" for o in a["options"])
                    + "</select>"
                )
            else:
                field = f'<input name="answer" id="answer-text-{e(aid)}" size="40" required>'
            body += form(f"/asks/{aid}/answer", csrf, "answer", field, name=f"answer-{aid}")
        body += " " + form(
            f"/asks/{aid}/withdraw", csrf, "withdraw", name=f"withdraw-{aid}", cls="danger"
        )
        body += "</div>"
    return body


def workers(d: dict[str, Any], *, links: bool = True) -> str:
    rows = [
        [
            link(f"/workers/{w['id']}", w["id"], links),
            health_word(w),
            w["state"],
            w.get("exit_code"),
            w.get("verify"),
            (w.get("result") or {}).get("status"),
            when(w.get("started_at")),
        ]
        for w in d["workers"]
    ]
    head = f"<p>{d['live']} live of at most {d['max_live']}</p>"
    return head + table(["id", "health", "state", "exit", "verify", "result", "started"], rows)


def worker(d: dict[str, Any], csrf: str | None) -> str:
    w = d["worker"]
    wid = w["id"]
    shown = [
        [k, when(v) if k.endswith("_at") and isinstance(v, int | float) else short(v)]
        for k, v in w.items()
        if v not in (None, {})
    ]
    body = f'<p id="health">{health_word(w)}</p>' + table(["key", "value"], shown)
    if w.get("alive"):
        body += "<p>" + form(f"/workers/{wid}/kill", csrf, "kill", name=f"kill-{wid}") + "</p>"
        tell = '<input name="text" size="50" required placeholder="a steering message">'
        body += "<p>" + form(f"/workers/{wid}/tell", csrf, "tell", tell, name=f"tell-{wid}")
        body += "</p>"
    body += "<h2>Told</h2>" + table(
        ["when", "from", "text", "read"],
        [
            [when(m.get("at")), m.get("from"), m.get("text"), when(m.get("read_at"))]
            for m in d["told"]
        ],
    )
    body += f'<h2>output.log (tail)</h2><pre id="log">{e(d["log_tail"])}</pre>'
    return body


def loops(d: dict[str, Any], csrf: str | None = None) -> str:
    rows = [
        [
            lp["name"],
            lp["level"],
            lp["cadence"],
            lp["action"],
            lp.get("waiting") or lp.get("next_fire"),
            lp.get("last_outcome"),
            lp.get("live_round"),
            lp["rounds"],
            lp["tokens"],
            Markup(
                ""
                if lp.get("live_round")
                else form(f"/loops/{lp['name']}/run", csrf, "run now", name=f"run-{lp['name']}")
            ),
        ]
        for lp in d["loops"]
    ]
    body = table(
        [
            "loop",
            "level",
            "cadence",
            "action",
            "next fire",
            "last",
            "live round",
            "rounds",
            "tokens",
            "",
        ],
        rows,
    )
    if d.get("errors"):
        body += table(["goal", "error"], [[k, v] for k, v in d["errors"].items()])
    return body + "<h2>Rounds</h2>" + _rounds(d["rounds"])


def report(snap: dict[str, Any]) -> str:
    """`looop report --html`: the overview and the last day's journal, one file, no links."""
    body = (
        f'<p class="muted">{e(snap["work_dir"])} · generated {e(snap["generated"])} · '
        f"looop {e(snap['version'])}</p>"
    )
    body += overview(snap["overview"], links=False)
    body += "<h2>Pending asks</h2>" + asks({"asks": snap["overview"]["asks"]}, None)
    body += "<h2>Journal</h2>" + f"<pre>{e(chr(10).join(snap['journal']['lines']))}</pre>"
    return layout("looop report", body, nav=False, live=False)
