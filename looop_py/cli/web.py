"""The human side: serve (the page), report --html, wait, tell, told."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from looop_py.cli.options import json_option, pass_paths, pass_workdir
from looop_py.cli.output import json_out, show
from looop_py.errors import LooopError, UsageError
from looop_py.jsonio import atomic_write
from looop_py.workdir.context import WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workdir.shelf import Pause

WAIT_POLL_S = 0.2


class NothingYet(LooopError):
    """`looop wait` timed out with nothing needing a human: exit 4."""

    exit_code = 4


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8765, show_default=True, type=int, help="Port to bind.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host: anyone who can reach it and has the token can steer.",
)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing (POST → 403).")
@json_option
@pass_paths
def serve(
    paths: Paths, *, host: str, port: int, allow_remote: bool, read_only: bool, as_json: bool
) -> None:
    """Serve the page: overview, beats, asks and approvals, workers, goals, sensors, loops,
    journal; open pages update by themselves within a second.

    Needs the web extra: pip install 'looop-py[web]' (from a checkout: '.[web]').
    Prints a login URL holding a one-time code (it works once: the browser gets a
    session cookie for 12 hours).
    Scripts send the token (state/web-token-PORT, 0600) as `Authorization: Bearer`.
    Every change is a POST with a CSRF token and an Origin check; a request whose
    Host is not an address this server prints is refused.

    \b
    Example:
      looop serve                      # http://127.0.0.1:8765/?code=…
      looop serve --read-only --port 9000
      looop serve --host 0.0.0.0 --allow-remote   # on your LAN: say so explicitly
    """
    from looop_py.web import security

    if not security.is_loopback(host) and not allow_remote:
        raise UsageError(
            f"{host} is not a loopback address: anyone who can reach it could try the page",
            "pass --allow-remote to mean it (plain HTTP: put it behind TLS), or bind 127.0.0.1",
        )
    try:
        from looop_py.web import app as web_app
    except ImportError as exc:
        from looop_py.cli.extras import install_hint

        raise UsageError(
            f"the web extra is not installed ({exc.name})", install_hint("web")
        ) from None
    token = security.new_token(paths, port)
    names = security.answers_to(host)
    app = web_app.build(paths, token, read_only=read_only, hosts=frozenset(names), port=port)
    code = app.state.web.sessions.new_code(time.time())
    url = f"http://{security.bracket(names[0])}:{port}/?code={code}"
    if as_json:
        json_out(
            {
                "url": url,
                "host": host,
                "port": port,
                "read_only": read_only,
                "addresses": [f"http://{security.bracket(n)}:{port}/" for n in names],
                "token_file": str(security.token_path(paths, port)),
            }
        )
    else:
        show([f"looop: serving {paths.root}" + (" read-only" if read_only else "")])
        show([f"open {url}   (the link logs one browser in, once)"])
        if len(names) > 1:
            show(
                ["also at: " + " ".join(f"http://{security.bracket(n)}:{port}/" for n in names[1:])]
            )
        show([f"another browser: /login with the token in {security.token_path(paths, port)}"])
    if not security.is_loopback(host):
        show(["warning: bound beyond this machine over plain HTTP; the token is the only key"])
    sys.stdout.flush()
    try:
        web_app.serve(app, host, port)
    finally:
        security.drop_token(paths, port, token)


@click.command()
@click.option(
    "--html", "html_file", required=True, type=click.Path(dir_okay=False), help="File to write."
)
@json_option
@pass_workdir
def report(wd: WorkDir, html_file: str, as_json: bool) -> None:
    """Write the overview and the last day as one self-contained HTML file.

    No server and no web extra needed; the charts are inline SVG.

    \b
    Example:
      looop report --html /tmp/looop.html && xdg-open /tmp/looop.html
    """
    from looop_py.web import data, pages

    html = pages.report(data.snapshot(wd))
    out = Path(html_file)
    atomic_write(out, html.encode("utf-8"))
    if as_json:
        json_out({"file": str(out.resolve()), "bytes": len(html.encode("utf-8"))})
    else:
        show([f"wrote {out}"])


def needs_human(wd: WorkDir, *, only_asks: bool, now: float) -> list[dict[str, Any]]:
    """Pending asks (and, unless only_asks, stuck workers), for `looop wait`."""
    from looop_py.web import data

    items: list[dict[str, Any]] = [
        {"type": "ask", **a} for a in data.asks(wd, now)["asks"] if a["state"] == "pending"
    ]
    if not only_asks:
        for w in data.workers(wd, now, include_ended=False)["workers"]:
            if w.get("health") == "stuck":
                items.append({"type": "worker", **w})
    return items


@click.command()
@click.option("--only-asks", is_flag=True, help="Only asks and approvals, not stuck workers.")
@click.option("--timeout", type=float, help="Give up after S seconds (exit 4).")
@json_option
@pass_workdir
def wait(wd: WorkDir, only_asks: bool, timeout: float | None, as_json: bool) -> None:
    """Block until something needs a human, then print it (pending asks first).

    For a concierge agent answering on a human's behalf; returns at once if
    something is already waiting. Exit 4 on --timeout.

    \b
    Example:
      looop wait --only-asks --json | jq -r '.items[0].id'
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    kinds = ("asks",) if only_asks else ()  # a stuck worker is a local clock: poll for it
    with Pause(wd.shelf, kinds, poll_s=WAIT_POLL_S) as pause:  # etcd: a watch on the asks
        while not (items := needs_human(wd, only_asks=only_asks, now=time.time())):
            if deadline is not None and time.monotonic() >= deadline:
                raise NothingYet(f"nothing needed a human within {timeout:g} s")
            pause.sleep(deadline)
    if as_json:
        json_out({"items": items})
        return
    for it in items:
        if it["type"] == "ask":
            verb = "approve or deny" if it["kind"] == "approval" else "answer"
            show(
                [f"{it['id']}  [{it['kind']} from {it['asker']}]  ({verb})", f"    {it['prompt']}"]
            )
        else:
            show([f"worker {it['id']} is {it['health']}"])


@click.command()
@click.argument("worker_id")
@click.argument("text")
@json_option
@pass_paths
def tell(paths: Paths, worker_id: str, text: str, as_json: bool) -> None:
    """Leave a steering message for a worker; it reads it with `looop told`.

    \b
    Example:
      looop tell fix-ci "skip the flaky test_network, it is tracked elsewhere"
    """
    from looop_py.asks import inbox

    sender = os.environ.get("LOOOP_SESSION_ID") or "human"
    got = inbox.tell(paths, worker_id, text, sender=sender, now=time.time())
    if as_json:
        json_out(got)
    else:
        show([f"told {worker_id}: {got['id']}"])


@click.command()
@click.option("--worker", "worker_id", help="Whose messages (default: $LOOOP_SESSION_ID).")
@json_option
@pass_paths
def told(paths: Paths, worker_id: str | None, as_json: bool) -> None:
    """A worker reads (and acknowledges) the messages told to it: one per line.

    \b
    Example:
      "$LOOOP_BIN" told        # in a worker
    """
    from looop_py.asks import inbox

    wid = worker_id or os.environ.get("LOOOP_SESSION_ID")
    if not wid:
        raise UsageError("no worker: pass --worker ID (inside a worker $LOOOP_SESSION_ID is set)")
    got = inbox.told(paths, wid, now=time.time())
    if as_json:
        json_out({"worker": wid, "messages": got})
    else:
        show([str(m.get("text")) for m in got])


COMMANDS = [serve, report, wait, tell, told]
