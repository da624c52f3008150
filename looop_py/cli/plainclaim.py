"""`looop claim` and `looop unclaim` without click: the one behaviour both doors run.

A script takes a claim around every piece of work (`epoch=$(looop claim X)`),
so these two commands are on a hot path like the pulse. console.py parses their
plain command lines here and skips click and the command tree; anything else
(`--help`, an unknown or malformed option) goes to click in cli/claims.py,
which calls the same `claim_command` and `unclaim_command`. Both go through the
work dir's coordination backend (coord/choose.py): files, or etcd.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from looop_py.cli.output import Note, json_out, show

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir

_FLAGS = {"--renew": "renew", "--json": "as_json"}
_VALUES = {"--session": ("session", str), "--ttl": ("ttl", float), "--pid": ("pid", int)}


def parse_plain(verb: str, argv: list[str]) -> dict[str, Any] | None:
    """Options of a plain `claim NAME …` / `unclaim NAME …` line (after -C DIR), else None."""
    if verb not in ("claim", "unclaim") or not argv or argv[0].startswith("-"):
        return None
    opts: dict[str, Any] = {"name": argv[0], "session": None, "pid": None, "as_json": False}
    if verb == "claim":
        opts |= {"ttl": None, "renew": False}
    rest = argv[1:]
    while rest:
        arg, rest = rest[0], rest[1:]
        key, _, value = arg.partition("=")
        if key in _FLAGS and not value and _FLAGS[key] in opts:
            opts[_FLAGS[key]] = True
            continue
        if key not in _VALUES or _VALUES[key][0] not in opts:
            return None
        if not value:
            if not rest:
                return None
            value, rest = rest[0], rest[1:]
        field, kind = _VALUES[key]
        try:
            opts[field] = kind(value)
        except ValueError:
            return None  # click says what is wrong with it
    if opts["session"] is None:
        opts["session"] = os.environ.get("LOOOP_SESSION_ID")
    return opts


def claim_command(
    wd: WorkDir,
    *,
    name: str,
    session: str | None,
    ttl: float | None,
    renew: bool,
    pid: int | None,
    as_json: bool,
) -> None:
    from looop_py.coord import holders
    from looop_py.coord.choose import coordinator

    holder = holders.resolve_holder(wd.paths, session or None, pid)
    coord = coordinator(wd)
    outcome = coord.claim(name, holder, ttl_s=ttl, renew=renew, now=time.time())
    if as_json:
        json_out({**outcome.claim.to_json(), "action": outcome.action})
    else:
        show([str(outcome.claim.epoch)])


def unclaim_command(
    wd: WorkDir, *, name: str, session: str | None, pid: int | None, as_json: bool
) -> None:
    from looop_py.coord import holders
    from looop_py.coord.choose import coordinator

    holder = holders.resolve_holder(wd.paths, session or None, pid)
    released = coordinator(wd).unclaim(name, holder, now=time.time())
    if as_json:
        json_out({"name": name, "released": released.to_json() if released else None})
    elif released is None:
        show([Note(f"{name} was not claimed")])
