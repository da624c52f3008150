"""A fence as scripts see it: `LOOOP_FENCE=<claim>:<token>`, checked by `looop fence check`.

A beat on a shared backend confirms its pulse token with etcd just before each side
effect (moves/act.py, beat/notify.py, a round's action command) and hands it to the
command it runs as LOOOP_FENCE (workdir/shelf.py `Fencing`); `looop claim NAME` prints
an epoch that fences the same way as `NAME:EPOCH`. `check` asks the backend, in one
round trip, whether that token is still its claim's live token: a script about to
`git push` or deploy runs `looop fence check || exit 0` first.
"""

from __future__ import annotations

import time

from looop_py.coord.base import PULSE
from looop_py.coord.choose import coordinator
from looop_py.errors import FenceLost, UsageError
from looop_py.ids import check_segment
from looop_py.workdir.context import WorkDir
from looop_py.workdir.shelf import FENCE_ENV


def parse(text: str) -> tuple[str, int]:
    """`NAME:TOKEN` (as LOOOP_FENCE holds it) → (name, token); UsageError otherwise."""
    name, colon, token = text.rpartition(":")
    if not colon or not token.isdigit() or int(token) <= 0:
        raise UsageError(
            f"{text!r} is not a fence",
            f"pass NAME:TOKEN (${FENCE_ENV} inside a beat's command, or NAME:EPOCH of a claim)",
        )
    return check_segment(name, "claim name"), int(token)


def check(wd: WorkDir, text: str | None) -> dict[str, object]:
    """Whether the fence `text` (None: this host's files pulse lock) still holds; FenceLost
    when it does not. One round trip on etcd; on files, the claim file (or the flock)."""
    coord = coordinator(wd)
    if text is None:
        if coord.backend != "files":
            raise UsageError(
                f"no fence to check: ${FENCE_ENV} is not set",
                "run it from a command a beat started, or pass NAME:TOKEN",
            )
        return {"backend": "files", "fence": None, "held": True, "note": _LOCAL}
    name, token = parse(text)
    confirm = getattr(coord, "confirm", None)
    if confirm is not None:  # etcd: the claim key exists at this token (its lease is alive)
        confirm(name, token)
        return {"backend": coord.backend, "fence": f"{name}:{token}", "held": True}
    if name == PULSE:  # files: no pulse claim, the flock is the fence
        return {"backend": "files", "fence": text, "held": True, "note": _LOCAL}
    view = coord.get(name, time.time())
    if view is None or not view.live or view.claim is None or view.claim.epoch != token:
        raise FenceLost(
            f"lost the {name} at token {token}"
            + (f": {view.claim.describe()} holds it" if view and view.claim and view.live else ""),
            "do not proceed: a newer holder acts instead",
            token=token,
        )
    return {"backend": "files", "fence": f"{name}:{token}", "held": True}


_LOCAL = "files backend: the pulse lock on this machine is the fence"
