"""The page's building blocks (pure): the stylesheet, the layout, escaping, times, links,
tables and forms. Every interpolated value goes through `e()` (html.escape); a `Markup`
string is already escaped and shown as is.
"""

from __future__ import annotations

import json
import time
from html import escape
from typing import Any

from looop_py.glyphs import visible
from looop_py.workdir import journal

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#1d232a;color:#fff;padding:8px 16px;display:flex;gap:14px;flex-wrap:wrap}
header a{color:#cfe1ff;text-decoration:none}header b{margin-right:10px}
main{padding:12px 16px;max-width:1100px;overflow-wrap:break-word}
.card{min-width:0}#pending li,pre{overflow-wrap:anywhere}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:10px 12px;flex:1 1 300px}
.big{font-size:22px;font-weight:600}.ax{font-size:10px;fill:#556}
table{border-collapse:collapse;width:100%;background:#fff}
td,th{border-bottom:1px solid #e5e8ec;padding:4px 6px;text-align:left;vertical-align:top}
pre{background:#0f1419;color:#e6e1cf;padding:8px;overflow:auto;max-height:420px;white-space:pre-wrap}
.ok{color:#17803d}.bad{color:#d93a3a}.muted{color:#667}
form.inline{display:inline}.ask{margin-bottom:10px}
button,.button{cursor:pointer;min-height:44px;min-width:44px;padding:8px 16px;font-size:15px;
border-radius:6px;border:1px solid #8a94a0;background:#fff;margin:4px 6px 4px 0;
display:inline-block;text-decoration:none;color:#1d232a;box-sizing:border-box}
input,select{min-height:40px;font-size:15px;max-width:100%;box-sizing:border-box}
.approve{background:#17803d;color:#fff;border-color:#17803d}
.danger{background:#fff;color:#b42323;border-color:#b42323}
.scroll{overflow-x:auto;max-width:100%}.pager a{margin-right:10px}
#live{margin-left:auto;font-size:13px}.live-on{color:#7ee2a8}.live-off{color:#ffb86b}
header form{display:inline;margin:0}header button{min-height:0;padding:2px 8px;margin:0;
font-size:13px}
.o-decided{color:#2b7de9}.o-failed{color:#d93a3a}.o-held{color:#b07f00}.o-locked{color:#8a63d2}
.h-finished{color:#17803d}.h-died,.h-failed{color:#d93a3a}
@media (max-width:600px){main{padding:8px}td,th{padding:4px 3px}.card{flex-basis:100%}
header{padding:8px}}
"""


class Markup(str):
    """Already-escaped HTML (a table cell shown as is)."""

    __slots__ = ()


NAV = (
    ("/", "overview"),
    ("/asks", "asks"),
    ("/beats", "beats"),
    ("/workers", "workers"),
    ("/goals", "goals"),
    ("/sensors", "sensors"),
    ("/loops", "loops"),
    ("/journal", "journal"),
)


def e(value: Any) -> str:
    """HTML-escaped, with every character a reader cannot see spelled out (glyphs.py)."""
    return escape(visible("" if value is None else str(value)))


def when(ts: float | None) -> str:
    """A time shown in the server's local time (the page's script: the browser's), UTC on
    hover."""
    if not isinstance(ts, int | float) or not ts:
        return "—"
    utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
    local = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    return Markup(f'<time datetime="{utc}" title="{utc} UTC">{local}</time>')


def when_iso(text: Any) -> str:
    """An event's ISO time shown as `when` shows it; anything else as it is, escaped."""
    t = journal.from_iso(text)
    return when(t) if t is not None else e(text)


def layout(
    title: str,
    body: str,
    *,
    read_only: bool = False,
    nav: bool = True,
    csrf: str | None = None,
    watch: str = "",
    live: bool = True,
) -> str:
    """A page. `live`: served by `looop serve` (its script, its live badge; not a report).
    `watch`: what else than the work dir's state refreshes it (a worker's log)."""
    links = "".join(f'<a href="{href}">{name}</a>' for href, name in NAV) if nav else ""
    badge = ' <span class="muted">(read-only)</span>' if read_only else ""
    head, tail = "", ""
    if live and nav:
        badge += '<span id="live" class="live-off">○ not live</span>'
        badge += '<form method="post" action="/logout"><button id="logout">log out</button></form>'
    if live:
        head = '<link rel="icon" href="/favicon.ico" type="image/svg+xml">'
        tail = '<script src="/app.js" defer></script>'
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{e(title)} · looop</title><style>{CSS}</style>{head}</head><body>"
        f"<header><b>looop</b>{links}{badge}</header>"
        f'<main data-watch="{e(watch)}"><h1>{e(title)}</h1>{body}</main>{tail}'
        "</body></html>"
    )


def form(
    action: str, csrf: str | None, label: str, fields: str = "", name: str = "", *, cls: str = ""
) -> str:
    if csrf is None:
        return ""
    return (
        f'<form class="inline" method="post" action="{e(action)}">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">{fields}'
        f'<button type="submit" name="do" value="{e(name or label)}" class="{e(cls)}" '
        f'id="{e(name or label)}">{e(label)}</button></form>'
    )


def clip(text: Any, n: int) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def outcome(o: Any) -> str:
    return Markup(f'<span class="o-{e(o)}">{e(o)}</span>')


def link(href: str, text: Any, on: bool = True, t: float | None = None) -> str:
    """A link; with `t`, its text is that time (local, UTC on hover)."""
    shown = when(t) if t else e(text)
    return Markup(f'<a href="{e(href)}">{shown}</a>') if on else Markup(shown)


def table(head: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return '<p class="muted">none</p>'
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if isinstance(c, Markup) else e(c)}</td>" for c in r) + "</tr>"
        for r in rows
    )
    return f'<div class="scroll"><table><tr>{th}</tr>{body}</table></div>'


def short(v: Any) -> str:
    text = v if isinstance(v, str) else pretty(v)
    return text if len(text) < 300 else text[:299] + "…"


def pretty(v: Any) -> str:
    return json.dumps(v, indent=1, sort_keys=True, ensure_ascii=False, default=str)


def would_run(run: dict[str, Any], lead: str) -> str:
    """What approving an ask runs, exactly as it will run, and the whole held move."""
    body = f"<p>{e(lead)} <b>{e(run['action'])}</b>"
    if run.get("file"):
        body += f" and writes exactly this to <b>{e(run['file'])}</b>"
    if run.get("text") is not None:
        body += f':</p><pre class="would-run">{e(run["text"])}</pre>'
    else:
        body += ' <span class="bad">(the ask does not show what would run)</span></p>'
    return body + (
        "<details><summary>the whole held move</summary>"
        f"<pre>{e(pretty(run['move']))}</pre></details>"
    )
