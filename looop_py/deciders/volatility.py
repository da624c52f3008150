"""How long each part of the readings has stood still from one decide prompt to the next.

    state/prompt-order.json  {"v": 1, "parts": {key: [digest, since]}}

A key is `signal:<stem>` or `detail:<stem>`; `since` is the time of the prompt
at which that part last changed (0 for a signal that has not changed since
the state was first written). The prompt (prompt.py) lists the parts that stood still
oldest first, so the part of it a provider's cache already holds stays a
byte-identical prefix: what changed most recently sits at the end of the
stable part, and a detail that moves every beat never enters it. The file is
a cache: a damaged or missing one only costs one prompt's prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from looop_py import jsonio, world
from looop_py.errors import CorruptFile

if TYPE_CHECKING:
    from looop_py.workdir.paths import Paths

MAX_PARTS = 20_000  # a work dir with more readings keeps no more than this


def parts(snapshots: Iterable[tuple[str, Any]]) -> dict[str, str]:
    """Each reading's signal and detail (when it has one), as `kind:stem` → digest."""
    out: dict[str, str] = {}
    for stem, snap in snapshots:
        if isinstance(snap, dict) and "signal" in snap:
            out[f"signal:{stem}"] = world.digest(jsonio.canonical(snap["signal"]))
            if snap.get("detail") not in (None, {}, []):
                out[f"detail:{stem}"] = world.digest(jsonio.canonical(snap["detail"]))
        else:
            out[f"signal:{stem}"] = world.digest(jsonio.canonical(snap))
    return out


def advance(
    state: Mapping[str, Any], now_parts: Mapping[str, str], now: float
) -> tuple[dict[str, list[Any]], dict[str, float]]:
    """(the new state, each part's `since`). Pure.

    A part whose digest is what the last prompt saw keeps its `since`; one that
    changed or appeared gets `now`. With no state yet, signals count as old (0) and
    details as just moved: a detail is shown as standing still only once it has.
    """
    new: dict[str, list[Any]] = {}
    for key, digest in sorted(now_parts.items())[:MAX_PARTS]:
        old = state.get(key)
        kept = (
            isinstance(old, list)
            and len(old) == 2
            and old[0] == digest
            and isinstance(old[1], int | float)
            and not isinstance(old[1], bool)
        )
        fresh = now if state or key.startswith("detail:") else 0.0
        new[key] = [digest, float(old[1]) if kept else fresh]  # type: ignore[index]
    return new, {key: v[1] for key, v in new.items()}


def load(paths: Paths) -> dict[str, Any]:
    try:
        data = jsonio.read_json(paths.prompt_order, {})
    except CorruptFile:
        return {}  # a cache: rebuilt by this prompt
    found = data.get("parts") if isinstance(data, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def save(paths: Paths, state: Mapping[str, Any]) -> None:
    jsonio.write_json(paths.prompt_order, {"v": 1, "parts": dict(state)}, durable=False)


def since(paths: Paths, snapshots: Iterable[tuple[str, Any]], now: float) -> dict[str, float]:
    """Advance the state on disk by this prompt; each part's `since`."""
    state, out = advance(load(paths), parts(snapshots), now)
    save(paths, state)
    return out
