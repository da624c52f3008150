"""What the probes say of claims, asks, workers and rounds right after a full beat, for the seal.

sensing/seal.py vouches for a live claim, a pending ask or a running round only when the probe's
signal now is the one the world hashed and the state rests on nothing but the
surveyed files and the processes named here, which the quiet beat checks are
still running (beat/quiet.py). Each returns (the probe's signal as canonical
JSON, each process as (pid, create time), when the first record expires), or
None when it cannot vouch: the next beat is then a full one.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

from looop_py import jsonio
from looop_py.sensing import probes

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence, Set

    from looop_py.sensing.seal import Holders, Sessions
    from looop_py.workdir.context import WorkDir
    from looop_py.workers.records import SessionView

    Holder = tuple[int, float]  # a process: pid, create time


def claims_now(
    wd: WorkDir, round_workers: Callable[[], Mapping[str, Holder | None] | None] = dict
) -> Holders | None:
    """None while a claim is not plainly held by a live process (an unreadable one, a
    round's whose round rounds_now does not vouch for): housekeeping may have work to do on
    it. A round's claim rests on its round staying live (`round_workers`, by round id: see
    rounds_now): on the round's running worker, or (None) on the round's record and its
    approval ask alone, which the survey holds."""
    if wd.shelf.shared:
        return _shared_claims_now(wd, round_workers)
    from looop_py.coord import reaper  # loaded already: the probe listed claims
    from looop_py.coord.holders import ROUND_PREFIX

    now = time.time()
    signal = jsonio.canonical(probes.claims(probes.Seen(wd, now, ())).get("signal"))
    holders: list[Holder | None] = []
    first = float("inf")
    for view in reaper.list_claims(wd.paths, now):
        held = view.claim
        label = (held.session if held is not None else None) or ""
        if view.live and held is not None and label.startswith(ROUND_PREFIX):
            workers, round_id = round_workers() or {}, label.removeprefix(ROUND_PREFIX)
            if held.pid is not None or round_id not in workers:
                return None
            holders.append(workers[round_id])  # the reaper keeps it while its round is live
            continue
        if not view.live or held is None or held.pid is None or held.create_time is None:
            return None
        holders.append((held.pid, held.create_time))
        first = min(first, held.expires_at if held.expires_at is not None else first)
    return signal.decode(), holders, first


def _shared_claims_now(
    wd: WorkDir, round_workers: Callable[[], Mapping[str, Holder | None] | None]
) -> Holders | None:
    """On etcd a claim lives while its holder's lease does, and the seal's fingerprint
    sees its key go with the lease (coord/etcdseal.py): no process for the quiet beat to
    look at, only when the first claim's own ttl runs out. A round's own claim (no process,
    no lease) lives while its round does: accepted while rounds_now vouches for the round
    (the beat reaps it only when the round ends, a write the fingerprint sees). None while
    a claim is another round's or unreadable, or etcd does not answer."""
    from looop_py.coord import base, choose  # a shared backend: loaded by the beat already
    from looop_py.coord.holders import ROUND_PREFIX
    from looop_py.errors import LooopError

    now = time.time()
    try:
        signal = jsonio.canonical(probes.claims(probes.Seen(wd, now, ())).get("signal"))
        views = choose.coordinator(wd).list_claims(now)
    except LooopError:
        return None
    first = float("inf")
    for view in views:
        held = view.claim
        if view.name == base.PULSE:
            continue  # never in the world (sensing/probes.py), nor in the seal's ranges
        label = (held.session if held is not None else None) or ""
        if view.live and held is not None and held.pid is None and label.startswith(ROUND_PREFIX):
            if label.removeprefix(ROUND_PREFIX) not in (round_workers() or {}):
                return None
            continue  # its round's (rounds_now): no ttl, no lease, no process of its own
        if not view.live or held is None or held.pid is None:
            return None
        first = min(first, held.expires_at if held.expires_at is not None else first)
    return signal.decode(), [], first


def asks_now(wd: WorkDir) -> Holders | None:
    """The `looop ask` process each pending ask's state rests on (mailbox.state_of);
    None while a record does not fit (housekeeping sets it aside).

    On a shared mailbox (etcd) the asks and answers are keys the seal's fingerprint covers
    (coord/etcdseal.py: an answer, a withdrawal, a stranded or expired mark, a delete all
    show). An ask of this host rests on its waiter here, as on files; another host's stays
    pending until that host writes it (mailbox.state_of), and a dead host's stays pending
    too. No clock moves one. None there while an approval waits to be carried out (the next
    beat's first step: on files state/approved/ holding one refuses the seal)."""
    if wd.shelf.shared and not wd.shelf.empty("approved"):
        return None
    from looop_py.asks.mailbox import AskState  # loaded already: the probe listed asks
    from looop_py.beat import corrupt  # loaded already: housekeeping checked the records

    if next(iter(corrupt.misfits(wd.paths, time.time())), None) is not None:
        return None
    seen = probes.Seen(wd, time.time(), ())
    signal = jsonio.canonical(probes.asks(seen).get("signal")).decode()
    holders: list[Holder | None] = []
    for view in seen.asks:
        ask = view.ask
        if view.state is not AskState.PENDING or ask.host not in (None, wd.shelf.host):
            continue  # expired, stranded, or another host's: nothing more to look at
        pid, created = ask.waiter.get("pid"), ask.waiter.get("create_time")
        if isinstance(pid, int) and isinstance(created, int | float):
            if isinstance(pid, bool) or isinstance(created, bool):
                return None
            holders.append((pid, float(created)))
    return signal, holders, float("inf")


def sessions_now(wd: WorkDir, signal: str, views: Sequence[SessionView]) -> Sessions | None:
    """What the sys-sessions signal rests on: an ended session's settled files (surveyed),
    pruned ttl after it ended (reap.housekeeping's rule); a live worker's process (pid,
    create time) and its output log's mtime, from which it turns stuck after
    stuck_after_s; a round's running worker by its process alone (its health is not in
    the signal). None while a session is not settled or not plainly live."""
    from looop_py.workers import records  # loaded already: the probe listed sessions

    until, holders, outputs = float("inf"), [], []
    for view in views:
        d = wd.paths.sessions / view.id
        status = records.read_record(d / records.STATUS)
        if view.alive:
            meta = records.read_record(d / records.META)
            created = jsonio.number(meta.get("create_time"))
            stuck_after = jsonio.number(records.as_dict(meta.get("limits")).get("stuck_after_s"))
            if view.pid is None or created is None:
                return None  # starting: housekeeping acts on it
            if view.round is not None and view.state is records.WorkerState.RUNNING:
                holders.append((view.pid, created))  # its health is no signal (rounds_now)
                continue
            if view.state is not records.WorkerState.RUNNING or view.health not in (
                records.Health.BUSY,
                records.Health.WAITING_ASK,
            ):
                return None
            try:
                mtime = (d / records.OUTPUT).stat().st_mtime_ns
            except OSError:
                return None
            holders.append((view.pid, created))
            outputs.append((f"sessions/{view.id}/{records.OUTPUT}", mtime))
            until = min(until, mtime / 1e9 + (stuck_after or 900.0))  # records.view's default
            continue
        ended = jsonio.number(status.get("ended_at")) or jsonio.number(status.get("finalized_at"))
        if not status.get("finalized_at") or ended is None:
            return None
        until = min(until, ended + wd.config.workers.session_ttl_s)
    return signal, until, holders, outputs


def rounds_now(
    wd: WorkDir, busy: Set[str] = frozenset()
) -> tuple[Holders, dict[str, Holder | None]] | None:
    """What ADVANCE would find of the rounds: the sys-rounds signal now, each live round's
    running worker (pid, create time; also by round id, for its claim; None for a round
    awaiting approval, which rests on files alone), and the first time a round may change
    by the clock alone (its wall budget runs out; a done round is archived DONE_KEEP_S
    after it ended). A round steps on only when its worker ends (the quiet beat checks
    the process), its record changes or its wall time runs out; one awaiting approval only
    when its ask or an answer to it comes or goes (steps._step_awaiting; a human's time
    is not on its wall budget, and a loop's approval ask has no waiter to expire it).
    None while a round waits on anything else (a step to take, a claim, an answer already
    there) or cannot be read; or while a loop in `busy` (whose due slot the seal leaves
    out: its round is live) has no live round now.

    On a shared shelf (etcd) the round, its ask, the answers and the claims are keys the
    seal's fingerprint covers. A round this host last stepped runs its worker here, as on
    files. Another host's running round is left to that host while its worker's claim
    lives (loops/advance.py `_worker_elsewhere`): it rests on that claim's key, which goes
    with its host's lease (its ttl is claims_now's `until`), and on the round's key, which
    that host rewrites when it steps the round; so it has no process here (None)."""
    seen = probes.Seen(wd, time.time(), ())
    signal = jsonio.canonical(probes.rounds(seen).get("signal")).decode()
    if wd.shelf.empty("rounds"):
        return None if busy else ((signal, [], float("inf")), {})
    from looop_py.engine.rounds import Phase  # loaded already: ADVANCE stepped the rounds
    from looop_py.identity import is_alive
    from looop_py.loops import store
    from looop_py.workers import records

    names, rounds = wd.shelf.names(store.LIVE), store.rounds_of(wd).all()
    if len(rounds) != len(names):
        return None  # one cannot be read: the full beat says so
    until = float("inf")
    workers: dict[str, Holder | None] = {}
    for state in rounds:
        if state.phase is Phase.DONE:
            until = min(until, (state.ended_at or 0.0) + store.DONE_KEEP_S)
            continue
        if state.phase is Phase.AWAITING_APPROVAL:
            if not _awaits_answer(wd, state.ask_id):
                return None  # answered, or its ask is gone: the next beat steps it on
            workers[state.id] = None  # its record, its ask and no answer: all surveyed
            continue
        running = {Phase.MAKER_RUNNING: state.maker_handle}
        running[Phase.CHECKER_RUNNING] = state.checker_handle
        handle = running.get(state.phase)
        if handle is None:
            return None
        wall = state.spec.budget.max_wall_s
        if wall is not None:
            until = min(until, state.started_at + wall)
        if wd.shelf.shared and store.host_of(wd.shelf, state.id) not in (None, wd.shelf.host):
            if not _worker_claim_live(wd, handle):
                return None  # its host is gone: the next beat steps it on (it fails)
            workers[state.id] = None  # another host steps it: keys alone, fingerprinted
            continue
        meta = records.read_meta(wd.paths, handle)
        pid, created = meta.get("pid"), jsonio.number(meta.get("create_time"))
        if type(pid) is not int or created is None or meta.get("round") != state.id:
            return None  # starting, or not the round's: the engine acts on it
        if not is_alive(pid, created):
            return None  # ended: the next beat steps the round on
        workers[state.id] = (pid, created)
    if not busy <= {state.loop for state in rounds if state.phase is not Phase.DONE}:
        return None  # a round ended since the loop's slot was left out: it fires now
    return (signal, list(workers.values()), until), workers


def _worker_claim_live(wd: WorkDir, handle: str) -> bool:
    """The claim another host's round worker holds while it lives (loops/adapters.py)."""
    from looop_py.coord.choose import coordinator  # loaded already: the beat took the pulse
    from looop_py.loops.adapters import worker_claim

    view = coordinator(wd).get(worker_claim(handle), time.time())
    return bool(view and view.live)


def _awaits_answer(wd: WorkDir, ask_id: str | None) -> bool:
    """Its approval ask is there and no answer to it is (mailbox.checked_answer would find
    none and MailboxApprovals.poll say pending): both folders are in the seal's survey;
    on a shared shelf both are keys its fingerprint covers."""
    from looop_py.ids import is_safe_segment  # loaded already: the shelf checks names by it

    if ask_id is None or not is_safe_segment(ask_id):
        return False
    if wd.shelf.shared:
        box = wd.shelf
        return box.get("asks", ask_id) is not None and box.get("answers", ask_id) is None
    asks, answers = wd.paths.asks / f"{ask_id}.json", wd.paths.answers / f"{ask_id}.json"
    return asks.is_file() and not os.path.lexists(answers)
