"""Asks that healed: a rules "these sensors just started failing" ask, withdrawn once every
sensor it names reads again, so nobody is asked to fix what already recovered."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from looop_py.asks import mailbox
from looop_py.deciders.rules import sensors_in_broken_ask
from looop_py.errors import UsageError
from looop_py.workdir import journal
from looop_py.world import is_error_signal

if TYPE_CHECKING:
    from looop_py.workdir.context import WorkDir


def close_healed(
    wd: WorkDir, snapshots: dict[str, dict[str, Any]], now: float
) -> list[dict[str, Any]]:
    """Withdraw each pending broken-sensor ask whose sensors all read without an error in
    `snapshots` (this beat's); a sensor that is gone counts as healed, one still missing
    from the readings does not. One journal line and one event each."""
    events: list[dict[str, Any]] = []
    for ask in mailbox.pending(wd):
        names = sensors_in_broken_ask(ask.prompt)
        if not names or not all(_reads(snapshots, wd, n) for n in names):
            continue
        said = ", ".join(names)
        try:
            mailbox.withdraw(wd, ask.id, now=now, reason=f"the sensors recovered: {said}")
        except UsageError:
            continue  # answered meanwhile: the human's answer stands
        journal.write(wd, f"· withdrew {ask.id}: sensors recovered ({said})", now)
        events.append({"event": "ask_withdrawn", "ask": ask.id, "healed": names})
    return events


def _reads(snapshots: dict[str, dict[str, Any]], wd: WorkDir, name: str) -> bool:
    snap = snapshots.get(f"sensor-{name}")
    if snap is None:  # removed since: nothing is left broken
        return not (wd.paths.sensors / f"{name}.sh").exists()
    return not is_error_signal(snap.get("signal"))
