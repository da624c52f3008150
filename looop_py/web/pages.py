"""The pages as HTML strings (pure: the dicts of web/data.py in, markup out; no web stack).

Every interpolated value goes through `e()` (html.escape). `csrf` is the form
token; None renders a page without any form (read-only mode, `looop report`).
"""

from __future__ import annotations

import json
import time
from html import escape
from typing import Any
from urllib.parse import quote

from looop_py.web import svg

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d232a;color:#fff;padding:8px 16px;display:flex;gap:14px;flex-wrap:wrap}
header a{color:#cfe1ff;text-decoration:none}header b{margin-right:10px}
main{padding:12px 16px;max-width:1100px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:10px 12px;flex:1 1 300px}
.big{font-size:22px;font-weight:600}.ax{font-size:10px;fill:#556}
table{border-collapse:collapse;width:100%;background:#fff}
td,th{border-bottom:1px solid #e5e8ec;padding:4px 6px;text-align:left;vertical-align:top}
pre{background:#0f1419;color:#e6e1cf;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap}
.ok{color:#17803d}.bad{color:#d93a3a}.muted{color:#667}
form.inline{display:inline}.ask{margin-bottom:10px}button{cursor:pointer;padding:3px 10px}
.o-decided{color:#2b7de9}.o-failed{color:#d93a3a}.o-held{color:#b07f00}.o-locked{color:#8a63d2}
"""


class Markup(str):
    """Already-escaped HTML (a table cell shown as is)."""

    __slots__ = ()


NAV = (
    ("/", "overview"),
    ("/asks", "asks"),
    ("/workers", "workers"),
    ("/loops", "loops"),
    ("/journal", "journal"),
)


def e(value: Any) -> str:
    return escape("" if value is None else str(value))


def when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "—"


def layout(title: str, body: str, *, read_only: bool = False, nav: bool = True) -> str:
    links = "".join(f'<a href="{href}">{name}</a>' for href, name in NAV) if nav else ""
    badge = ' <span class="muted">(read-only)</span>' if read_only else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{e(title)} · looop</title><style>{CSS}</style></head><body>"
        f"<header><b>looop</b>{links}{badge}</header><main><h1>{e(title)}</h1>{body}</main>"
        "</body></html>"
    )


def _form(action: str, csrf: str | None, label: str, fields: str = "", name: str = "") -> str:
    if csrf is None:
        return ""
    return (
        f'<form class="inline" method="post" action="{e(action)}">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">{fields}'
        f'<button type="submit" name="do" value="{e(name or label)}" '
        f'id="{e(name or label)}">{e(label)}</button></form>'
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
            f"{e(last.get('ts'))} {e(last.get('reason') or '')}",
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
    body += _table(
        ["id", "health", "state", "runtime", "uptime"],
        [
            [
                _link(f"/workers/{w['id']}", w["id"], links),
                w["health"],
                w["state"],
                w.get("runtime"),
                _secs(w.get("uptime_s")),
            ]
            for w in workers
        ],
    )
    body += "<h2>Live rounds</h2>" + _rounds(d["rounds"])
    body += "<h2>Recent beats</h2>" + _table(
        ["when", "outcome"],
        [
            [_link(f"/beats/{quote(str(b['ts']))}", b["ts"], links), _outcome(b["outcome"])]
            for b in reversed(d["beats"][-15:])
        ],
    )
    return body


def _usd(v: float) -> str:
    return f"${v:.2f}"


def _secs(s: Any) -> str:
    return f"{round(s)} s" if isinstance(s, int | float) else "—"


def _outcome(o: Any) -> str:
    return Markup(f'<span class="o-{e(o)}">{e(o)}</span>')


def _link(href: str, text: Any, on: bool = True) -> str:
    return Markup(f'<a href="{e(href)}">{e(text)}</a>') if on else e(text)


def _table(head: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return '<p class="muted">none</p>'
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if isinstance(c, Markup) else e(c)}</td>" for c in r) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def _rounds(rounds: list[dict[str, Any]]) -> str:
    return _table(
        ["round", "loop", "phase", "outcome", "tokens", "waits on"],
        [
            [r["id"], r.get("loop"), r["phase"], r.get("outcome"), r.get("tokens"), r.get("ask")]
            for r in rounds
        ],
    )


def beat(d: dict[str, Any]) -> str:
    b = d["beat"]
    body = (
        f"<p>{_outcome(b.get('outcome'))} · {e(b.get('ts'))} · {e(b.get('ms'))} ms · "
        f"{e(d['explanation'])}</p>"
    )
    if b.get("reason"):
        body += f'<p class="bad">reason: {e(b["reason"])}</p>'
    body += "<h2>What changed</h2>" + _table(
        ["item", "old", "new"],
        [[c.get("item"), _short(c.get("old")), _short(c.get("new"))] for c in b.get("changed", [])],
    )
    if b.get("move"):
        body += f"<h2>Move</h2><pre>{e(_pretty(b['move']))}</pre>"
    if d["run_id"]:
        body += f"<h2>Decide archive runs/{e(d['run_id'])}/</h2>"
        for name, text in d["run"].items():
            body += f"<h3>{e(name)}</h3><pre>{e(text)}</pre>"
    return body


def _short(v: Any) -> str:
    text = v if isinstance(v, str) else _pretty(v)
    return text if len(text) < 300 else text[:299] + "…"


def _pretty(v: Any) -> str:

    return json.dumps(v, indent=1, sort_keys=True, ensure_ascii=False, default=str)


def asks(d: dict[str, Any], csrf: str | None) -> str:
    if not d["asks"]:
        return '<p class="muted" id="no-asks">no pending asks</p>'
    body = ""
    for a in d["asks"]:
        aid = a["id"]
        body += (
            f'<div class="card ask" id="ask-{e(aid)}"><b>{e(aid)}</b> '
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
            body += f"<p>Approving runs <b>{e(run['action'])}</b>"
            if run.get("file"):
                body += f" and writes exactly this to <b>{e(run['file'])}</b>"
            if run.get("text") is not None:
                body += f':</p><pre class="would-run">{e(run["text"])}</pre>'
            else:
                body += ' <span class="bad">(the ask does not show what would run)</span></p>'
            body += (
                "<details><summary>the whole held move</summary>"
                f"<pre>{e(_pretty(run['move']))}</pre></details>"
            )
            body += _form(f"/asks/{aid}/approve", csrf, "approve", name=f"approve-{aid}")
            reason = '<input name="reason" placeholder="reason (optional)">'
            body += " " + _form(f"/asks/{aid}/deny", csrf, "deny", reason, name=f"deny-{aid}")
        else:
            if a.get("options"):
                field = (
                    '<select name="answer">'
                    + "".join(f"<option>{e(o)}</option>" for o in a["options"])
                    + "</select>"
                )
            else:
                field = f'<input name="answer" id="answer-text-{e(aid)}" size="40" required>'
            body += _form(f"/asks/{aid}/answer", csrf, "answer", field, name=f"answer-{aid}")
        body += " " + _form(f"/asks/{aid}/withdraw", csrf, "withdraw", name=f"withdraw-{aid}")
        body += "</div>"
    return body


def workers(d: dict[str, Any], *, links: bool = True) -> str:
    rows = [
        [
            _link(f"/workers/{w['id']}", w["id"], links),
            w["health"],
            w["state"],
            w.get("exit_code"),
            w.get("verify"),
            (w.get("result") or {}).get("status"),
            when(w.get("started_at")),
        ]
        for w in d["workers"]
    ]
    head = f"<p>{d['live']} live of at most {d['max_live']}</p>"
    return head + _table(["id", "health", "state", "exit", "verify", "result", "started"], rows)


def worker(d: dict[str, Any], csrf: str | None) -> str:
    w = d["worker"]
    wid = w["id"]
    shown = [
        [k, when(v) if k.endswith("_at") and isinstance(v, int | float) else _short(v)]
        for k, v in w.items()
        if v not in (None, {})
    ]
    body = _table(["key", "value"], shown)
    if w.get("alive"):
        body += "<p>" + _form(f"/workers/{wid}/kill", csrf, "kill", name=f"kill-{wid}") + "</p>"
        tell = '<input name="text" size="50" required placeholder="a steering message">'
        body += "<p>" + _form(f"/workers/{wid}/tell", csrf, "tell", tell, name=f"tell-{wid}")
        body += "</p>"
    body += "<h2>Told</h2>" + _table(
        ["when", "from", "text", "read"],
        [
            [when(m.get("at")), m.get("from"), m.get("text"), when(m.get("read_at"))]
            for m in d["told"]
        ],
    )
    body += f'<h2>output.log (tail)</h2><pre id="log">{e(d["log_tail"])}</pre>'
    if w.get("alive"):
        body += '<meta http-equiv="refresh" content="5">'
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
                else _form(f"/loops/{lp['name']}/run", csrf, "run now", name=f"run-{lp['name']}")
            ),
        ]
        for lp in d["loops"]
    ]
    body = _table(
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
        body += _table(["goal", "error"], [[k, v] for k, v in d["errors"].items()])
    return body + "<h2>Rounds</h2>" + _rounds(d["rounds"])


def journal(d: dict[str, Any]) -> str:
    form = (
        f'<form method="get" action="/journal"><input name="q" value="{e(d["query"])}" '
        'placeholder="search the journal" id="q"> <button>search</button></form>'
    )
    lines = "\n".join(d["lines"]) or "(nothing)"
    return f'{form}<pre id="journal">{e(lines)}</pre>'


def report(snap: dict[str, Any]) -> str:
    """`looop report --html`: the overview and the last day's journal, one file, no links."""
    body = (
        f'<p class="muted">{e(snap["work_dir"])} · generated {e(snap["generated"])} · '
        f"looop {e(snap['version'])}</p>"
    )
    body += overview(snap["overview"], links=False)
    body += "<h2>Pending asks</h2>" + asks({"asks": snap["overview"]["asks"]}, None)
    body += "<h2>Journal</h2>" + f"<pre>{e(chr(10).join(snap['journal']['lines']))}</pre>"
    return layout("looop report", body, nav=False)
