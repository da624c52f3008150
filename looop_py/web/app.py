"""The Starlette app behind `looop serve` (owns starlette and uvicorn).

Every request needs a session (a one-time `?code=` from the printed URL, or the
token posted to /login, buys a session cookie) or `Authorization: Bearer TOKEN`,
else 401. Every state change is a POST carrying the CSRF token (form field
`csrf` or header `X-CSRF-Token`) whose Origin, when sent, names this server,
else 403; the Host header must name this server, port included (a DNS-rebinding
defence). `--read-only` refuses every POST with 403. A page asked for with
`Accept: application/json` or `?format=json` answers with the JSON the CLI's
`--json` prints. /live streams Server-Sent Events when the work dir changes.
Core calls run in a thread, never on the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from looop_py.asks import inbox, mailbox
from looop_py.coord.choose import Reopening
from looop_py.errors import LooopError
from looop_py.moves import approvals
from looop_py.web import (
    actions,
    catalog,
    data,
    history,
    live,
    markup,
    pages,
    security,
    static,
    views,
)
from looop_py.web.sessions import SESSION_S, Sessions
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workers import kill

Handler = Callable[[Request], Awaitable[Response]]
Load = Callable[[WorkDir, str], "dict[str, Any] | None"]


class Web:
    def __init__(
        self, paths: Paths, token: str, *, read_only: bool, hosts: frozenset[str], port: int
    ) -> None:
        self.paths = paths
        self.opened = Reopening(paths)  # looop.toml read again after an edit, as a command would
        self.token = token
        self.csrf = security.csrf_for(token)
        self.read_only = read_only
        self.hosts = hosts
        self.port = port
        self.cookie = security.cookie_name(port)
        self.sessions = Sessions()
        self.watcher = live.Watcher(paths)

    # -- the guard every route goes through ---------------------------------------
    def guarded(self, handler: Handler, *, changes: bool = False, public: bool = False) -> Handler:
        async def endpoint(request: Request) -> Response:
            response = await checked(request)
            response.headers.update(security.HEADERS)
            return response

        async def checked(request: Request) -> Response:
            host = request.headers.get("host")
            if not security.host_ok(host, self.hosts, self.port):
                return _refuse(request, 403, "this server does not answer to that Host")
            code = request.query_params.get("code")
            if code is not None and request.method == "GET":
                return self.redeem(request, code)
            if request.query_params.get("token") is not None:
                return _refuse(
                    request,
                    401,
                    "the token does not go in a URL: open the one `looop serve` "
                    "printed, or log in at /login",
                )
            if not public and not self.authorised(request):
                return _refuse(request, 401, "not logged in: open the URL `looop serve` printed")
            if changes:
                if self.read_only and not public:
                    return _refuse(request, 403, "this server is read-only (--read-only)")
                origin = request.headers.get("origin")
                if not security.origin_ok(origin, request.headers.get("referer"), host):
                    return _refuse(request, 403, "cross-origin request refused")
                form = await _form(request)
                if not public:
                    sent = form.get("csrf") or request.headers.get("x-csrf-token")
                    if not security.same(sent, self.csrf):
                        return _refuse(request, 403, "missing or wrong CSRF token")
                request.state.form = form
            try:
                return await handler(request)
            except LooopError as exc:
                return _refuse(request, 409, exc.message + (f" ({exc.hint})" if exc.hint else ""))

        return endpoint

    def redeem(self, request: Request, code: str) -> Response:
        """A one-time login code → a session cookie, and the same page without the code."""
        sid = self.sessions.redeem(code, time.time())
        if sid is None:
            return _refuse(
                request,
                401,
                "that login link was used already or is too old: log in with the token "
                f"(`cat state/web-token-{self.port}`) or restart `looop serve`",
            )
        rest = [p for p in request.url.query.split("&") if p and not p.startswith("code=")]
        return self.logged_in(request.url.path + ("?" + "&".join(rest) if rest else ""), sid)

    def logged_in(self, target: str, sid: str) -> Response:
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            self.cookie, sid, max_age=int(SESSION_S), httponly=True, samesite="strict", path="/"
        )
        return response

    def authorised(self, request: Request) -> bool:
        if self.sessions.valid(request.cookies.get(self.cookie), time.time()):
            return True
        return security.same(security.bearer(request.headers.get("authorization")), self.token)

    def page(
        self, request: Request, title: str, body: str, payload: Any, watch: str = ""
    ) -> Response:
        if _wants_json(request):
            return JSONResponse(payload)
        return HTMLResponse(
            markup.layout(title, body, read_only=self.read_only, csrf=self.form_token, watch=watch)
        )

    @property
    def form_token(self) -> str | None:
        return None if self.read_only else self.csrf

    # -- logging in and out, the script, the icon, the live stream -----------------------
    async def login_form(self, request: Request) -> Response:
        return HTMLResponse(markup.layout("log in", views.login(self.port), nav=False))

    async def login(self, request: Request) -> Response:
        if not security.same(request.state.form.get("token", "").strip(), self.token):
            return _refuse(request, 401, "wrong token")
        return self.logged_in("/", self.sessions.start(time.time()))

    async def logout(self, request: Request) -> Response:
        self.sessions.end(request.cookies.get(self.cookie))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(self.cookie, path="/")
        return response

    async def script(self, request: Request) -> Response:
        return Response(static.SCRIPT, media_type="text/javascript")

    async def icon(self, request: Request) -> Response:
        return Response(static.ICON, media_type="image/svg+xml")

    async def live_stream(self, request: Request) -> Response:
        queue = self.watcher.subscribe()

        async def stream() -> AsyncIterator[bytes]:
            try:
                yield b"retry: 2000\n: live\n\n"
                while self.authorised(request):  # a session that ends closes its stream
                    try:
                        moved = await asyncio.wait_for(queue.get(), live.PING_S)
                    except TimeoutError:
                        yield b": ping\n\n"
                        continue
                    yield live.message(moved)
            finally:
                self.watcher.unsubscribe(queue)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"}
        )

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
        return self.page(request, f"beat {ts}", pages.beat(d) + views.beat_result(d["beat"]), d)

    async def beats(self, request: Request) -> Response:
        woke = request.query_params.get("woke") == "1"
        page = _int(request.query_params.get("page"))
        d = await run_in_threadpool(lambda: history.beats(self.paths, page, woke_only=woke))
        return self.page(request, "beats", views.beats(d), d)

    async def asks(self, request: Request) -> Response:
        def both(wd: WorkDir) -> dict[str, Any]:
            return {**data.asks(wd, time.time()), "answered": history.answered(wd)}

        d = await run_in_threadpool(both, self.opened.current())
        body = pages.asks(d, self.form_token) + views.answered(d["answered"])
        return self.page(request, "asks", body, d)

    async def one(
        self, request: Request, what: str, load: Load, render: Callable[[Any], str], title: str = ""
    ) -> Response:
        """A page about one thing named in the path: 404 when `load` finds nothing."""
        key = str(next(iter(request.path_params.values())))
        d = await run_in_threadpool(load, self.opened.current(), key)
        if d is None:
            return _refuse(request, 404, f"no {what} {key}")
        return self.page(request, title.format(key) or f"{what} {key}", render(d), d)

    async def ask(self, request: Request) -> Response:
        render = partial(views.ask, csrf=self.form_token)
        return await self.one(request, "ask", history.ask_history, render)

    async def confirm(self, request: Request) -> Response:
        render = partial(views.confirm, csrf=self.form_token)
        return await self.one(request, "ask", history.ask_history, render, "approve {}?")

    async def goals(self, request: Request) -> Response:
        q = request.query_params.get("q", "")[:200]
        page = _int(request.query_params.get("page"))
        d = await run_in_threadpool(catalog.goals, self.opened.current(), q, page)
        return self.page(request, "goals", views.goals(d), d)

    async def goal(self, request: Request) -> Response:
        return await self.one(request, "goal", catalog.goal, views.goal)

    async def round(self, request: Request) -> Response:
        return await self.one(request, "round", catalog.round_record, views.round_page)

    async def sensors(self, request: Request) -> Response:
        d = await run_in_threadpool(catalog.sensors, self.opened.current())
        return self.page(request, "sensors", views.sensors(d), d)

    async def sensor(self, request: Request) -> Response:
        return await self.one(request, "sensor", catalog.sensor, views.sensor)

    async def workers(self, request: Request) -> Response:
        d = await run_in_threadpool(data.workers, self.opened.current(), time.time())
        return self.page(request, "workers", pages.workers(d), d)

    async def worker(self, request: Request) -> Response:
        wid = request.path_params["id"]
        d = await run_in_threadpool(data.worker, self.opened.current(), wid, time.time())
        if d is None:
            return _refuse(request, 404, f"no worker {wid}")
        body = pages.worker(d, self.form_token)
        return self.page(request, f"worker {wid}", body, d, watch=f"log:{wid}")

    async def loops(self, request: Request) -> Response:
        d = await run_in_threadpool(data.loops, self.opened.current(), time.time())
        return self.page(request, "loops and rounds", pages.loops(d, self.form_token), d)

    async def journal(self, request: Request) -> Response:
        q = request.query_params.get("q", "")[:200]
        page = _int(request.query_params.get("page"))
        d = await run_in_threadpool(history.search, self.paths, q, page)
        return self.page(request, "journal", views.journal(d), d)

    # -- actions (POST, guarded with changes=True) ----------------------------------
    async def answer(self, request: Request) -> Response:
        aid, form = request.path_params["id"], request.state.form
        text = (form.get("answer") or "").strip()
        if not text:
            return _refuse(request, 400, "the answer is empty")
        got = await run_in_threadpool(
            lambda: mailbox.answer(self.opened.current(), aid, text, now=time.time(), by="page")
        )
        return _done(request, f"/asks/{aid}", actions.answer_json(aid, got))

    async def approve(self, request: Request) -> Response:
        aid = request.path_params["id"]
        unverified = request.state.form.get("unverified") == "yes"
        got = await run_in_threadpool(
            lambda: approvals.approve(
                self.opened.current(), aid, now=time.time(), by="page", unverified=unverified
            )
        )
        return _done(request, f"/asks/{aid}", actions.answer_json(aid, got))

    async def deny(self, request: Request) -> Response:
        aid, reason = request.path_params["id"], request.state.form.get("reason") or None
        got = await run_in_threadpool(
            lambda: approvals.deny(
                self.opened.current(), aid, now=time.time(), reason=reason, by="page"
            )
        )
        return _done(request, f"/asks/{aid}", actions.answer_json(aid, got))

    async def withdraw(self, request: Request) -> Response:
        aid = request.path_params["id"]
        got = await run_in_threadpool(
            lambda: mailbox.withdraw(
                self.opened.current(), aid, now=time.time(), reason="withdrawn from the page"
            )
        )
        return _done(request, f"/asks/{aid}", actions.answer_json(aid, got))

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
        got = await run_in_threadpool(actions.start_round, self.opened.current(), name)
        return _done(request, "/loops", got)


def _int(text: str | None) -> int:
    return int(text) if text and text.isdigit() and len(text) < 7 else 1


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
    login = views.login(request.url.port or 80) if code == 401 else ""
    body = f'<p class="bad">{markup.e(message)}</p>{login}'
    return HTMLResponse(markup.layout(f"{code}", body, nav=code not in (401,)), status_code=code)


def _done(request: Request, back: str, payload: Any) -> Response:
    if _wants_json(request) or "text/html" not in request.headers.get("accept", ""):
        return JSONResponse(payload)
    return RedirectResponse(back, status_code=303)


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    return security.form_fields(body, request.headers.get("content-type", ""))


def build(
    paths: Paths,
    token: str,
    *,
    read_only: bool = False,
    hosts: frozenset[str] | None = None,
    port: int = 8765,
) -> Starlette:
    """The app; its server's state (sessions, the watcher) is `app.state.web`, whose
    `.sessions` mints the login code `looop serve` prints."""
    web = Web(
        paths,
        token,
        read_only=read_only,
        hosts=hosts or security.LOOPBACK,
        port=port,
    )
    g = web.guarded

    def post(path: str, handler: Handler, *, public: bool = False) -> Route:
        return Route(path, g(handler, changes=True, public=public), methods=["POST"])

    routes = [
        Route("/", g(web.overview)),
        Route("/favicon.ico", g(web.icon, public=True)),
        Route("/app.js", g(web.script, public=True)),
        Route("/login", g(web.login_form, public=True)),
        post("/login", web.login, public=True),
        post("/logout", web.logout, public=True),
        Route("/live", g(web.live_stream)),
        Route("/beats", g(web.beats)),
        Route("/beats/{ts:path}", g(web.beat)),
        Route("/asks", g(web.asks)),
        Route("/asks/{id}", g(web.ask)),
        Route("/asks/{id}/confirm", g(web.confirm)),
        Route("/workers", g(web.workers)),
        Route("/workers/{id}", g(web.worker)),
        Route("/goals", g(web.goals)),
        Route("/goals/{id}", g(web.goal)),
        Route("/rounds/{id}", g(web.round)),
        Route("/sensors", g(web.sensors)),
        Route("/sensors/{name}", g(web.sensor)),
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
    app = Starlette(routes=routes)
    app.state.web = web
    return app


def serve(app: Starlette, host: str, port: int) -> None:
    import uvicorn  # only when the server really starts (tests use the app directly)

    # Open /live streams never end by themselves: stop waiting for them after a second.
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
