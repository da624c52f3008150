"""The pages added for steering: beats, one ask (with its history and the approve confirm),
goals, sensors, rounds, the journal search and the login form. Pure: dicts in, markup out.

Every value goes through `e()` (html.escape); tables through pages._table.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from looop_py.web import svg
from looop_py.web.markup import (
    Markup,
    e,
    form,
    link,
    outcome,
    pretty,
    short,
    table,
    when,
    would_run,
)


def _pager(path: str, page: int, pages: int, **params: Any) -> str:
    if pages <= 1:
        return ""
    keep = {k: v for k, v in params.items() if v}

    def href(n: int) -> str:
        return f"{path}?{urlencode({**keep, 'page': n})}"

    out = f'<p class="pager">page {page} of {pages} '
    if page > 1:
        out += f'<a href="{e(href(page - 1))}" id="newer">← newer</a>'
    if page < pages:
        out += f'<a href="{e(href(page + 1))}" id="older">older →</a>'
    return out + "</p>"


def _result(r: dict[str, Any] | None) -> str:
    if not r:
        return ""
    mark = "✓" if r.get("ok") else "✗"
    text = f"{mark} {r.get('note') or ''}".strip()
    return text


def beats(d: dict[str, Any]) -> str:
    only = d["woke_only"]
    body = (
        f"<p>{d['total']} beats in {e(d['scanned'])}. "
        + (
            '<a href="/beats">show skipped beats too</a>'
            if only
            else '<a href="/beats?woke=1">only beats that woke the decider</a>'
        )
        + "</p>"
    )
    rows = [
        [
            link(f"/beats/{quote(str(b['ts']))}", b["ts"], True, b.get("t")),
            outcome(b["outcome"]),
            ", ".join(c for c in b["changed"] if c)[:200],
            b.get("decided") or b.get("reason") or "",
            _result(b.get("result")) + (f" · asked {b['held_as']}" if b.get("held_as") else ""),
            (b.get("result") or {}).get("exit_code"),
            short((b.get("result") or {}).get("output") or ""),
            _cost(b),
        ]
        for b in d["beats"]
    ]
    body += table(
        ["when", "outcome", "changed", "decided", "result", "exit", "output", "cost"], rows
    )
    return body + _pager("/beats", d["page"], d["pages"], woke="1" if only else "")


def _cost(b: dict[str, Any]) -> str:
    parts = []
    if b.get("tokens"):
        parts.append(f"{b['tokens']} tokens")
    if isinstance(b.get("cost_usd"), int | float):
        parts.append(f"${b['cost_usd']:.4f}")
    return " · ".join(parts)


def beat_result(b: dict[str, Any]) -> str:
    """The beat page's "what ran" section."""
    stats: dict[str, Any] = b["decide"] if isinstance(b.get("decide"), dict) else {}
    r = stats.get("result") if isinstance(stats.get("result"), dict) else None
    if r is None:
        return ""
    body = f"<h2>What ran</h2><p>{e(_result(r))}"
    if r.get("exit_code") is not None:
        body += f" · exit code {e(r['exit_code'])}"
    body += "</p>"
    if r.get("output"):
        body += f'<pre class="output">{e(r["output"])}</pre>'
    return body


def _by(answer: dict[str, Any]) -> str:
    where = {"cli": "the command line", "page": "the page", "api": "the Python API"}
    by = answer.get("by")
    who = answer.get("who")
    text = where.get(str(by), str(by)) if by else "somewhere unrecorded (before looop kept it)"
    return f"{who} from {text}" if who else text


def ask(d: dict[str, Any], csrf: str | None) -> str:
    a = d["ask"]
    aid = a["id"]
    body = (
        f"<p><b>{e(a['kind'])}</b> from {e(a['asker'])}, asked {when(a.get('created_at'))} · "
        f'<span id="ask-state">{e(d["state"])}</span></p><pre>{e(a["prompt"])}</pre>'
    )
    run = d.get("would_run")
    if run is not None:
        body += would_run(run, "Approving runs" if d["answer"] is None else "It would have run")
    ans = d.get("answer")
    if ans is None:
        if run is not None and csrf is not None:
            body += (
                f'<p><a class="button approve" id="approve-{e(aid)}" '
                f'href="/asks/{e(aid)}/confirm">approve…</a></p>'
            )
        body += '<p><a href="/asks">answer it on the asks page</a></p>'
    else:
        verdict = ans.get("verdict")
        body += '<h2>Answer</h2><div class="scroll"><table id="answer">'
        for k, v in (
            ("answered", when(ans.get("answered_at"))),
            ("by", _by(ans)),
            ("verdict", verdict or "answered"),
            ("answer", ans.get("answer")),
            ("what happened", ans.get("note")),
        ):
            if v not in (None, ""):
                cell = v if isinstance(v, Markup) else e(v)
                body += f"<tr><th>{e(k)}</th><td>{cell}</td></tr>"
        body += "</table></div>"
    body += "<h2>Journal lines naming it</h2>"
    body += f'<pre id="ask-journal">{e(chr(10).join(d["journal"]) or "(none)")}</pre>'
    return body


def confirm(d: dict[str, Any], csrf: str | None) -> str:
    """The second step of approve: what will run, and the one button that runs it."""
    a = d["ask"]
    aid = a["id"]
    run = d.get("would_run")
    if d.get("answer") is not None or run is None:
        return (
            f'<p id="gone">{e(aid)} is no longer waiting for approval ({e(d["state"])}).</p>'
            f'<p><a href="/asks/{e(aid)}">what became of it</a></p>'
        )
    body = f"<pre>{e(a['prompt'])}</pre>" + would_run(run, "Approving runs")
    hold = a.get("hold") or {}
    # A proposal its checker did not verify needs the second, explicit yes (as --unverified).
    unverified = "round" in hold and hold.get("verified") is False
    if unverified:
        body += '<p class="warn" id="unverified">Its checker did NOT verify this proposal.</p>'
    body += form(
        f"/asks/{aid}/approve",
        csrf,
        f"yes, run this {run['action']}" + (" unverified" if unverified else ""),
        '<input type="hidden" name="unverified" value="yes">' if unverified else "",
        name="confirm",
        cls="approve",
    )
    return body + '<a class="button" href="/asks" id="cancel">cancel</a>'


def answered(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    return "<h2>Answered</h2>" + table(
        ["ask", "asked", "answer", "what happened", "by", "when"],
        [
            [
                link(f"/asks/{r['ask']['id']}", r["ask"]["id"]),
                short(r["ask"].get("prompt") or ""),
                r["answer"].get("verdict") or r["answer"].get("answer"),
                r["answer"].get("note") or "",
                _by(r["answer"]),
                when(r["at"]),
            ]
            for r in rows
        ],
    )


def goals(d: dict[str, Any]) -> str:
    form = (
        f'<form method="get" action="/goals"><input name="q" value="{e(d["query"])}" '
        'placeholder="find a goal by id or title" id="goal-q"> <button>find</button></form>'
    )
    body = form + f'<p id="goal-total">{d["total"]} goals</p>'
    body += table(
        ["goal", "title", "loop", "frontmatter", "problem"],
        [
            [
                link(f"/goals/{g['id']}", g["id"]),
                g["title"],
                "loop" if g["loop"] else "",
                ", ".join(g["keys"]),
                g.get("error") or "",
            ]
            for g in d["goals"]
        ],
    )
    return body + _pager("/goals", d["page"], d["pages"], q=d["query"])


def goal(d: dict[str, Any]) -> str:
    body = ""
    if d.get("error"):
        body += f'<p class="bad">{e(d["error"])}</p>'
    if d["frontmatter"]:
        body += "<h2>Frontmatter</h2>" + table(
            ["key", "value"], [[k, short(v)] for k, v in d["frontmatter"].items()]
        )
    body += f'<h2>Text</h2><pre id="goal-body">{e(d["body"])}</pre>'
    body += f"<h2>Rounds ({len(d['rounds'])}, {d['tokens']} tokens)</h2>"
    if d.get("report"):
        body += f"<p>latest round to report: {link('/rounds/' + d['report'], d['report'])}</p>"
    return body + rounds_table(d["rounds"], results=True)


def rounds_table(rounds: list[dict[str, Any]], *, results: bool = False) -> str:
    """Rounds, newest first; `results`: with their maker's and checker's results."""
    head = [
        "round",
        "loop",
        "phase",
        "outcome",
        "trigger",
        "started",
        "tokens",
        "waits on",
        "error",
    ]
    rows = [
        [
            link(f"/rounds/{r['id']}", r["id"]),
            link(f"/goals/{r['loop']}", r["loop"]) if r.get("loop") else "",
            r["phase"],
            r.get("outcome"),
            r.get("trigger"),
            when(r.get("started_at")),
            r.get("tokens"),
            link(f"/asks/{r['ask']}", r["ask"]) if r.get("ask") else "",
            r.get("error") or "",
        ]
        + ([r.get("maker") or "", r.get("checker") or ""] if results else [])
        for r in rounds
    ]
    return table(head + (["maker", "checker"] if results else []), rows)


ROUND_KEYS = ("phase", "outcome", "reason", "error", "maker", "checker", "proposed", "decision")


def round_page(d: dict[str, Any]) -> str:
    if d.get("unreadable"):
        return '<p class="bad">this round\'s record cannot be read</p>'
    rec = d["record"]
    rows = [[k, short(rec[k])] for k in ROUND_KEYS if rec.get(k) not in (None, "", {}, [])]
    rows += [[k, when(rec[k])] for k in ("started_at", "ended_at") if rec.get(k)]
    body = table(["", ""], rows)
    return (
        body
        + '<details id="round-record"><summary>the whole record</summary>'
        + f"<pre>{e(pretty(rec))}</pre></details>"
    )


def sensors(d: dict[str, Any]) -> str:
    return table(
        ["sensor", "health", "signal"],
        [
            [
                link(f"/sensors/{s['name']}", s["name"]),
                _health(s["health"]),
                short(s["signal"]),
            ]
            for s in d["sensors"]
        ],
    )


def _health(word: str) -> Markup:
    return Markup(f'<span class="{"ok" if word == "ok" else "bad"}">{e(word)}</span>')


def sensor(d: dict[str, Any]) -> str:
    snap = d["snapshot"] or {}
    body = (
        f'<p>health: <b class="{"ok" if d["health"] == "ok" else "bad"}" id="sensor-health">'
        f"{e(d['health'])}</b> · its signal changed {d['changes']} times in the event log</p>"
    )
    body += "<h2>Last reading</h2>" + table(
        ["", ""], [["signal", short(snap.get("signal"))], ["detail", short(snap.get("detail"))]]
    )
    if len(d["series"]) >= 2:  # a line needs two readings
        chart = svg.series(d["series"], str(d["series_key"]))
        body += f"<h2>{e(d['series_key'])} over time</h2>"
        body += f'<div class="card" id="sensor-chart">{chart}</div>'
    body += "<h2>Signal history (newest first)</h2>" + table(
        ["when", "signal", "run"],
        [[when(r["t"]), short(r["signal"]), short(r.get("run") or "")] for r in d["readings"]],
    )
    if d.get("script") is not None:
        body += f"<h2>sensors/{e(d['name'])}.sh</h2><pre>{e(d['script'])}</pre>"
    return body


def journal(d: dict[str, Any]) -> str:
    form = (
        f'<form method="get" action="/journal"><input name="q" value="{e(d["query"])}" '
        'placeholder="search the whole journal" id="q"> <button>search</button></form>'
    )
    what = f"lines holding “{e(d['query'])}”" if d["query"] else "lines"
    count = f'<p id="journal-count">{d["total"]} {what}, newest first</p>'
    lines = "\n".join(d["lines"]) or "(nothing)"
    pager = _pager("/journal", d["page"], d["pages"], q=d["query"])
    return f'{form}{count}<pre id="journal">{e(lines)}</pre>{pager}'


def login(port: int) -> str:
    return (
        "<p>Open the login link <code>looop serve</code> printed (it works once), or paste "
        f"this server's token (<code>cat state/web-token-{port}</code> in the work dir):</p>"
        '<form method="post" action="/login"><input type="password" name="token" '
        'autocomplete="off" id="token" required> <button id="login">log in</button></form>'
    )
