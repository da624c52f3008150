"""The Starlette app behind `looop serve` (owns starlette and uvicorn).

Every request needs the token (`?token=` once, then the cookie; or
`Authorization: Bearer`), else 401. Every state change is a POST carrying the
CSRF token (form field `csrf` or header `X-CSRF-Token`) whose Origin, when
sent, names this server, else 403; the Host header must name this server too
(a DNS-rebinding defence). `--read-only` refuses every POST with 403. A page
asked for with `Accept: application/json` or `?format=json` answers with the
JSON the CLI's `--json` prints. Core calls run in a thread, never on the loop.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from looop_py.asks import inbox, mailbox
from looop_py.coord.choose import Reopening
from looop_py.errors import Busy, LooopError
from looop_py.locks import PulseLock
from looop_py.loops import advance
from looop_py.moves import approvals
from looop_py.web import data, pages, security
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workers import kill

Handler = Callable[[Request], Awaitable[Response]]
MAX_BODY = 256 * 1024
# Nothing from elsewhere, no script, no framing (clickjacking), no Referer to other sites.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would make a POST's Origin "null"
    "Cache-Control": "no-store",
}


class Web:
    def __init__(self, paths: Paths, token: str, *, read_only: bool, hosts: frozenset[str]) -> None:
        self.paths = paths
        self.opened = Reopening(paths)  # looop.toml read again after an edit, as a command would
        self.token = token
        self.csrf = security.csrf_for(token)
        self.read_only = read_only
        self.hosts = hosts

    # -- the guard every route goes through ---------------------------------------
    def guarded(self, handler: Handler, *, changes: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            response = await checked(request)
            response.headers.update(HEADERS)
            return response

        async def checked(request: Request) -> Response:
            host = request.headers.get("host")
            if not security.host_ok(host, self.hosts):
                return _refuse(request, 403, "this server does not answer to that Host")
            given = request.query_params.get("token")
            if given is not None and request.method == "GET":
                if not security.same(given, self.token):
                    return _refuse(request, 401, "wrong token: open the URL `looop serve` printed")
                target = request.url.path
                rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                if rest:
                    target += "?" + "&".join(f"{k}={v}" for k, v in rest)
                response: Response = RedirectResponse(target, status_code=303)
                response.set_cookie(
                    security.cookie_name(request.url.port),
                    self.token,
                    httponly=True,
                    samesite="strict",
                    path="/",
                )
                return response
            if not self.authorised(request):
                return _refuse(request, 401, "no token: open the URL `looop serve` printed")
            if changes:
                if self.read_only:
                    return _refuse(request, 403, "this server is read-only (--read-only)")
                origin = request.headers.get("origin")
                if not security.origin_ok(origin, request.headers.get("referer"), host):
                    return _refuse(request, 403, "cross-origin request refused")
                form = await _form(request)
                sent = form.get("csrf") or request.headers.get("x-csrf-token")
                if not security.same(sent, self.csrf):
                    return _refuse(request, 403, "missing or wrong CSRF token")
                request.state.form = form
            try:
                return await handler(request)
            except LooopError as exc:
                return _refuse(request, 409, exc.message + (f" ({exc.hint})" if exc.hint else ""))

        return endpoint

    def authorised(self, request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        bearer = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else None
        cookie = request.cookies.get(security.cookie_name(request.url.port))
        return security.same(cookie, self.token) or security.same(bearer, self.token)

    def page(self, request: Request, title: str, body: str, payload: Any) -> Response:
        if _wants_json(request):
            return JSONResponse(payload)
        return HTMLResponse(pages.layout(title, body, read_only=self.read_only))

    @property
    def form_token(self) -> str | None:
        return None if self.read_only else self.csrf

    # -- pages ----------------------------------------------------------------------
    async def overview(self, request: Request) -> Response:
        days = 7 if request.query_params.get("days") == "7" else 1
        d = await run_in_threadpool(data.overview, self.opened.current(), time.time(), days)
        return self.page(request, "overview", pages.overview(d), d)

    async def beat(self, request: Request) -> Response:
        ts = request.path_params["ts"]
        d = await run_in_threadpool(data.beat, self.paths, ts)
        if d is None:
            return _refuse(request, 404, f"no beat at {ts} in events.jsonl")
        return self.page(request, f"beat {ts}", pages.beat(d), d)

    async def asks(self, request: Request) -> Response:
        d = await run_in_threadpool(data.asks, self.opened.current(), time.time())
        return self.page(request, "asks", pages.asks(d, self.form_token), d)

    async def workers(self, request: Request) -> Response:
        d = await run_in_threadpool(data.workers, self.opened.current(), time.time())
        return self.page(request, "workers", pages.workers(d), d)

    async def worker(self, request: Request) -> Response:
        wid = request.path_params["id"]
        d = await run_in_threadpool(data.worker, self.opened.current(), wid, time.time())
        if d is None:
            return _refuse(request, 404, f"no worker {wid}")
        return self.page(request, f"worker {wid}", pages.worker(d, self.form_token), d)

    async def loops(self, request: Request) -> Response:
        d = await run_in_threadpool(data.loops, self.opened.current(), time.time())
        return self.page(request, "loops and rounds", pages.loops(d, self.form_token), d)

    async def journal(self, request: Request) -> Response:
        q = request.query_params.get("q", "")[:200]
        d = await run_in_threadpool(data.journal_lines, self.paths, q)
        return self.page(request, "journal", pages.journal(d), d)

    # -- actions (POST, guarded with changes=True) ----------------------------------
    async def answer(self, request: Request) -> Response:
        aid, form = request.path_params["id"], request.state.form
        text = (form.get("answer") or "").strip()
        if not text:
            return _refuse(request, 400, "the answer is empty")
        got = await run_in_threadpool(
            lambda: mailbox.answer(self.opened.current(), aid, text, now=time.time())
        )
        return _done(request, "/asks", _answer_json(aid, got))

    async def approve(self, request: Request) -> Response:
        aid = request.path_params["id"]
        unverified = request.state.form.get("unverified") == "yes"
        got = await run_in_threadpool(
            lambda: approvals.approve(
                self.opened.current(), aid, now=time.time(), unverified=unverified
            )
        )
        return _done(request, "/asks", _answer_json(aid, got))

    async def deny(self, request: Request) -> Response:
        aid, reason = request.path_params["id"], request.state.form.get("reason") or None
        got = await run_in_threadpool(
            lambda: approvals.deny(self.opened.current(), aid, now=time.time(), reason=reason)
        )
        return _done(request, "/asks", _answer_json(aid, got))

    async def withdraw(self, request: Request) -> Response:
        aid = request.path_params["id"]
        got = await run_in_threadpool(
            lambda: mailbox.withdraw(
                self.opened.current(), aid, now=time.time(), reason="withdrawn from the page"
            )
        )
        return _done(request, "/asks", _answer_json(aid, got))

    async def kill(self, request: Request) -> Response:
        wid = request.path_params["id"]
        got = await run_in_threadpool(
            lambda: kill.kill(self.paths, wid, reason="killed from the page")
        )
        return _done(request, f"/workers/{wid}", got.to_json())

    async def tell(self, request: Request) -> Response:
        wid, text = request.path_params["id"], request.state.form.get("text") or ""
        got = await run_in_threadpool(
            lambda: inbox.tell(self.paths, wid, text, sender="page", now=time.time())
        )
        return _done(request, f"/workers/{wid}", got)

    async def run_round(self, request: Request) -> Response:
        name = request.path_params["name"]
        got = await run_in_threadpool(start_round, self.opened.current(), name)
        return _done(request, "/loops", got)


def start_round(wd: WorkDir, loop: str) -> dict[str, Any]:
    """Start a round of `loop` now, under the pulse lock (it never races a beat)."""
    lock = PulseLock(wd.paths.pulse_lock)
    if not lock.acquire(timeout_s=approvals.LOCK_WAIT_S):
        raise Busy("a pulse held the lock for two minutes", "try again")
    try:
        state = advance.start_round(wd, loop, now=time.time(), trigger="page")
    finally:
        lock.release()
    return {"round": state.id, "loop": loop, "phase": state.phase.value}


def _answer_json(ask_id: str, got: mailbox.Answer) -> dict[str, Any]:
    """The shape of `looop answer|approve|deny --json`."""
    return {
        "id": ask_id,
        "answer": got.text,
        "answered_at": got.answered_at,
        "verdict": got.verdict,
        "note": got.note,
    }


def _wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return request.query_params.get("format") == "json" or (
        "application/json" in accept and "text/html" not in accept
    )


def _refuse(request: Request, code: int, message: str) -> Response:
    if _wants_json(request) or (
        request.method == "POST" and "text/html" not in request.headers.get("accept", "")
    ):
        return JSONResponse({"error": message, "status": code}, status_code=code)
    body = f'<p class="bad">{pages.e(message)}</p>'
    return HTMLResponse(pages.layout(f"{code}", body, nav=code not in (401,)), status_code=code)


def _done(request: Request, back: str, payload: Any) -> Response:
    if _wants_json(request) or "text/html" not in request.headers.get("accept", ""):
        return JSONResponse(payload)
    return RedirectResponse(back, status_code=303)


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_BODY:
        return {}
    kind = request.headers.get("content-type", "")
    if kind.startswith("application/json"):
        try:
            import json  # only for JSON bodies from scripts

            got = json.loads(body or b"{}")
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


def build(
    paths: Paths, token: str, *, read_only: bool = False, hosts: frozenset[str] | None = None
) -> Starlette:
    web = Web(
        paths, token, read_only=read_only, hosts=hosts or frozenset({"127.0.0.1", "localhost"})
    )
    g = web.guarded

    def post(path: str, handler: Handler) -> Route:
        return Route(path, g(handler, changes=True), methods=["POST"])

    routes = [
        Route("/", g(web.overview)),
        Route("/beats/{ts:path}", g(web.beat)),
        Route("/asks", g(web.asks)),
        Route("/workers", g(web.workers)),
        Route("/workers/{id}", g(web.worker)),
        Route("/loops", g(web.loops)),
        Route("/journal", g(web.journal)),
        post("/asks/{id}/answer", web.answer),
        post("/asks/{id}/approve", web.approve),
        post("/asks/{id}/deny", web.deny),
        post("/asks/{id}/withdraw", web.withdraw),
        post("/workers/{id}/kill", web.kill),
        post("/workers/{id}/tell", web.tell),
        post("/loops/{name}/run", web.run_round),
    ]
    return Starlette(routes=routes)


def serve(app: Starlette, host: str, port: int) -> None:
    import uvicorn  # only when the server really starts (tests use the app directly)

    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
