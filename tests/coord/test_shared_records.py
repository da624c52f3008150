"""The shelf (workdir/shelf.py): asks, answers, approvals, rounds, timers and the loop
schedule, on files and on a real etcd, and two hosts sharing one loop through it.

The contract half runs on both backends: whole-record reads and writes, exclusive
creation under contention from many processes (ask ids, answers), archiving, and
damaged records seen rather than hidden. The etcd half is what sharing is for: a
paused ex-leader's writes are refused (FenceLost) and leave nothing behind; an ask
filed on one host is answered from the other; a round escalated on one host is
approved and finished on the other; a cadence slot one host fired is spent for both.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py import identity, jsonio
from looop_py.asks import mailbox, seal
from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome
from looop_py.coord import choose, holders
from looop_py.coord.base import PULSE
from looop_py.deciders.base import DecideRequest, Decision
from looop_py.errors import CorruptFile, FenceLost, UsageError
from looop_py.loops import store
from looop_py.moves import approvals
from looop_py.schedules import timers
from looop_py.workdir import shelf
from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init
from tests.conftest import close_opened, open_wd, run_looop, wait_for
from tests.coord.test_contract import TTL, Noop
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.etcdserver import Cluster, use_etcd
from tests.loops.test_e2e import DONE, loop_goal, setup


class Hosts:
    """Work dirs on one backend: files share one dir; on etcd each host has its own dir,
    all on one prefix, each with its own host id (in its state/host-id)."""

    def __init__(self, name: str, tmp: Path, cluster: Cluster | None, ttl: float = TTL) -> None:
        self.name = name
        self.ttl = ttl
        self.tmp = tmp
        self.cluster = cluster
        self.prefix = f"/looop/shelf-{uuid.uuid4().hex[:10]}"
        self._dirs: dict[str, Paths] = {}

    def workdir(self, host: str = "a", config: str = '[decider]\nbackend = "noop"\n') -> Paths:
        key = "a" if self.cluster is None else host
        if key not in self._dirs:
            root = init(self.tmp / f"host-{key}").root
            for script in (root / "sensors").glob("*.sh"):
                script.unlink()
            (root / "looop.toml").write_text(config + "\n[coordination]\n")
            (root / "state").mkdir(exist_ok=True)
            (root / "state" / "host-id").write_text(f"{key}\n")  # per machine, never shared
            if self.cluster is not None:
                use_etcd(root / "looop.toml", self.cluster.endpoints, self.prefix, self.ttl)
            self._dirs[key] = Paths(root)
        return self._dirs[key]


def hand_over(wd: Paths) -> None:
    """Host `wd` hands the shared pulse over (as `looop down` there does): on etcd the pulse
    sticks to the host that took it (coord/election.py) until it stops or resigns."""
    choose.coordinator(open_wd(wd)).resign()


@pytest.fixture(params=["files", pytest.param("etcd", marks=pytest.mark.etcd)])
def hosts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hosts]:
    cluster = request.getfixturevalue("etcd") if request.param == "etcd" else None
    yield Hosts(request.param, tmp_path, cluster)
    close_opened()


@pytest.fixture
def two(etcd: Cluster, tmp_path: Path) -> Iterator[Hosts]:
    yield Hosts("etcd", tmp_path, etcd)
    close_opened()


# -- the contract, on both backends ------------------------------------------------------------


def test_records_are_whole_and_kinds_are_apart(hosts: Hosts) -> None:
    box = open_wd(hosts.workdir()).shelf
    assert box.shared is (hosts.name == "etcd")
    assert box.empty("timers") and box.get("timers", "t") is None and box.names("timers") == []
    box.put("timers", "t", b'{"v": 1}\n')
    box.put("timers", "u", b'{"v": 2}\n')
    assert box.get("timers", "t") == b'{"v": 1}\n' and not box.empty("timers")
    assert box.names("timers") == ["t", "u"] and box.empty("asks")
    assert box.create("timers", "t", b"{}") is False  # never over an existing record
    assert box.create("asks", "t", b'{"x": 1}') is True  # same name, another kind
    assert shelf.json_items(box, "timers") == [("t", {"v": 1}), ("u", {"v": 2})]
    assert box.delete("timers", "t") is True and box.delete("timers", "t") is False
    assert box.move("asks", "t", "rounds-done") is True and box.move("asks", "t", "rounds") is False
    assert box.get("rounds-done", "t") == b'{"x": 1}' and box.empty("asks")
    with pytest.raises(UsageError):
        box.put("timers", "../x", b"{}")
    with pytest.raises(UsageError):
        box.put("secrets", "x", b"{}")


def test_a_damaged_record_is_seen_and_named(hosts: Hosts) -> None:
    wd = hosts.workdir()
    box = open_wd(wd).shelf
    box.put("rounds", "broken", b"{")
    with pytest.raises(CorruptFile, match="broken"):
        shelf.read_json(box, "rounds", "broken")
    (row,) = store.rows(box, include_done=False)
    assert row.id == "broken" and row.phase == "unreadable"
    assert store.is_live(box, "broken")  # fail closed: its claims are not reaped
    assert store.probe(box)["signal"]["unreadable"] == ["broken"]


def _open_asks(root: str, n: int, out: str) -> None:
    ids = [
        mailbox.open_ask(open_wd(Paths(Path(root))), prompt="?", asker="w", now=1.0).id
        for _ in range(n)
    ]
    Path(out).write_text("\n".join(ids))


def _answer(root: str, ask_id: str, text: str, out: str) -> None:
    try:
        mailbox.answer(open_wd(Paths(Path(root))), ask_id, text, now=2.0)
        Path(out).write_text("won")
    except UsageError:
        Path(out).write_text("lost")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_ask_ids_and_answers_are_exclusive_across_processes(hosts: Hosts, tmp_path: Path) -> None:
    wd = hosts.workdir()
    open_wd(wd)  # open the backend once here, not in every forked child
    ctx = multiprocessing.get_context("fork")
    procs, each = 6, 8
    jobs = [
        ctx.Process(target=_open_asks, args=(str(wd.root), each, str(tmp_path / f"ids{i}")))
        for i in range(procs)
    ]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join(60)
        assert j.exitcode == 0
    ids = [i for k in range(procs) for i in (tmp_path / f"ids{k}").read_text().split()]
    assert len(ids) == len(set(ids)) == procs * each  # no id handed out twice
    assert {a.id for a in mailbox.pending(open_wd(wd))} == set(ids)
    # Everyone answers the same ask at once: exactly one answer is recorded.
    target = ids[0]
    racers = [
        ctx.Process(target=_answer, args=(str(wd.root), target, f"r{i}", str(tmp_path / f"a{i}")))
        for i in range(procs)
    ]
    for r in racers:
        r.start()
    for r in racers:
        r.join(60)
    results = sorted((tmp_path / f"a{i}").read_text() for i in range(procs))
    assert results.count("won") == 1, results
    got = mailbox.get_answer(open_wd(wd), target)
    assert got is not None and got.text.startswith("r")
    assert target not in {a.id for a in mailbox.pending(open_wd(wd))}


def test_archiving_moves_each_ended_round_once(hosts: Hosts) -> None:
    box = open_wd(hosts.workdir()).shelf
    ended = {"id": "r1", "phase": "done", "ended_at": 100.0, "started_at": 50.0}
    shelf.write_json(box, "rounds", "r1", ended)
    shelf.write_json(box, "rounds", "r2", {**ended, "id": "r2", "ended_at": 5000.0})
    assert store.archive_done(box, 4000.0) == ["r1"]
    assert store.archive_done(box, 4000.0) == []
    assert box.names("rounds") == ["r2"] and box.names("rounds-done") == ["r1"]
    assert [r.id for r in store.rows(box, include_done=True)] == ["r1", "r2"]
    assert store.rounds_of(open_wd(hosts.workdir())).new_id("x", 0.0) != "r1"


def test_the_files_backend_keeps_the_work_dir_layout(tmp_path: Path) -> None:
    wd = Hosts("files", tmp_path, None).workdir()
    ask = mailbox.open_ask(open_wd(wd), prompt="ok?", asker="decider", now=1.0)
    mailbox.answer(open_wd(wd), ask.id, "yes", now=2.0)
    timers.write(open_wd(wd), "nightly", now=1.0, every_s=3600)
    assert (wd.asks / f"{ask.id}.json").exists() and (wd.answers / f"{ask.id}.json").exists()
    assert jsonio.read_json(wd.timers / "nightly.json")["every_s"] == 3600
    assert "host" not in jsonio.read_json(wd.asks / f"{ask.id}.json")


# -- sharing: etcd only ----------------------------------------------------------------------


@pytest.mark.etcd
def test_a_paused_ex_leader_writes_nothing(two: Hosts) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    coord_a, coord_b = choose.coordinator(open_wd(a)), choose.coordinator(open_wd(b))
    with coord_a.pulse() as token_a:
        assert token_a is not None
        with open_wd(a).shelf.fenced(PULSE, token_a):
            first = mailbox.open_ask(
                open_wd(a), prompt="before the pause", asker="decider", now=1.0
            )
            # A pauses; its pulse lapses (its lease revoked here as expiry would) and B beats.
            coord_a.resign()
            with coord_b.pulse() as token_b:
                assert token_b > token_a
                with pytest.raises(FenceLost, match="pulse"):
                    mailbox.open_ask(open_wd(a), prompt="after the pause", asker="decider", now=2.0)
                with pytest.raises(FenceLost):
                    timers.write(open_wd(a), "late", now=2.0, in_s=60)
                with pytest.raises(FenceLost):
                    open_wd(a).shelf.delete("asks", first.id)
                with pytest.raises(FenceLost):
                    mailbox.answer(open_wd(a), first.id, "x", now=2.0)
    # Nothing of the paused leader's landed; what it wrote while it led is there.
    assert [x.id for x in mailbox.pending(open_wd(b))] == [first.id]
    assert timers.load_all(open_wd(b)) == {}


@pytest.mark.etcd
@pytest.mark.timeout(60)
def test_an_ask_filed_on_one_host_is_answered_from_the_other(two: Hosts) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    asking = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(a.root), "ask", "--prompt", "ship it?"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: mailbox.pending(open_wd(b)), timeout=20, what="the ask on host b")
        (ask,) = mailbox.pending(open_wd(b))
        assert ask.host == "a" and ask.prompt == "ship it?"
        listed = run_looop("-C", str(b.root), "asks", "--json")
        assert ask.id in listed.stdout, listed.stderr
        r = run_looop("-C", str(b.root), "answer", ask.id, "yes, ship")
        assert r.returncode == 0, r.stderr
        out, err = asking.communicate(timeout=20)
    finally:
        asking.kill()
    assert asking.returncode == 0, err
    assert "yes, ship" in out
    assert not (a.asks.exists() and list(a.asks.iterdir()))  # nothing on host a's disk


def sweep_hosts(two: Hosts, command: str) -> tuple[Paths, Paths]:
    """Hosts a and b on one prefix with the rules decider and an L2 loop `sweep`, whose
    approved action runs `command`."""
    dirs = []
    for host in ("a", "b"):
        wd = two.workdir(host)
        setup(wd, f'[actions.apply-patch]\ncommand = "{command}"\n')
        use_etcd(wd.config, two.cluster.endpoints, two.prefix, TTL)  # type: ignore[union-attr]
        (wd.state / "host-id").write_text(f"{host}\n")  # per machine, as ever
        loop_goal(wd, "sweep", "L2", f'{DONE} "patch"', f'{DONE} "ok"', action="apply-patch")
        dirs.append(wd)
    return dirs[0], dirs[1]


@pytest.mark.etcd
@pytest.mark.timeout(120)
def test_a_round_escalated_on_one_host_is_approved_and_finished_on_the_other(
    two: Hosts, tmp_path: Path
) -> None:
    marker = tmp_path / "applied"
    a, b = sweep_hosts(two, f"touch {marker}")
    shared = open_wd(a).shelf

    def waiting() -> bool:
        return any(r.phase == "awaiting-approval" for r in store.rows(shared, include_done=False))

    def beaten() -> bool:  # host a beats: its maker and checker run here, then it escalates
        if waiting():
            return True
        beat(open_wd(a))
        return False

    wait_for(
        beaten,
        60,
        lambda: f"the escalation: {store.rows(shared, include_done=True)}",
        interval=0.05,
    )
    (row,) = store.rows(shared, include_done=False)
    assert row.host == "a" and (a.sessions / f"{row.id}.maker").is_dir()
    (ask,) = [x for x in mailbox.pending(open_wd(b)) if x.kind is mailbox.AskKind.APPROVAL]
    approved = run_looop("-C", str(b.root), "approve", ask.id, "--json")
    assert approved.returncode == 0, approved.stderr
    assert not marker.exists()  # shared: the next beat, on whichever host, carries it on
    hand_over(a)
    beat(open_wd(b))
    (done,) = store.rows(open_wd(b).shelf, include_done=True)
    assert done.phase == "done" and done.outcome == "proceeded" and done.host == "b"
    assert marker.exists()
    # What the round learned is recalled on host a too (its full history stays on b).
    (learned,) = store.memory_of(open_wd(a)).recall("sweep", 5)
    assert learned.round_id == done.id and (b.memory / "sweep.jsonl").exists()
    # Host a's next beat starts no second round: the cadence slot and the trigger are shared.
    beat(open_wd(a))
    assert len(store.rows(shared, include_done=True)) == 1
    assert not list(a.rounds.glob("*.json")) and not list(b.rounds.glob("*.json"))


@pytest.mark.etcd
@pytest.mark.timeout(60)
def test_a_round_whose_worker_runs_on_another_host_is_left_to_it_while_it_lives(
    two: Hosts,
) -> None:
    from looop_py.engine.rounds import Phase, RoundState
    from looop_py.engine.spec import LoopSpec
    from looop_py.loops import advance
    from looop_py.loops.adapters import worker_claim

    a, b = two.workdir("a"), two.workdir("b")
    spec = LoopSpec.from_dict({"name": "sweep", "intent": "x", "level": "L1"})
    state = RoundState(
        id="r1",
        spec=spec,
        phase=Phase.MAKER_RUNNING,
        started_at=1.0,
        updated_at=1.0,
        maker_handle="r1.maker",
    )
    store.rounds_of(open_wd(a)).save(state)  # host a stepped it last: its maker runs there
    worker = subprocess.Popen(["sleep", "60"])
    try:
        created = identity.create_time(worker.pid)
        holder = holders.Holder("round.r1", worker.pid, created)
        choose.coordinator(open_wd(a)).claim(worker_claim("r1.maker"), holder, now=time.time())
        rounds_b = store.rounds_of(open_wd(b))
        assert advance._worker_elsewhere(open_wd(b), rounds_b, state, time.time())
        assert not advance._worker_elsewhere(
            open_wd(a), store.rounds_of(open_wd(a)), state, time.time()
        )
        # The worker (or its whole host) dies: its claim goes, and any host may step the round.
        worker.kill()
        worker.wait()
        wait_for(
            lambda: not advance._worker_elsewhere(open_wd(b), rounds_b, state, time.time()),
            timeout=TTL + 5,
            what="the dead worker's claim to go",
        )
    finally:
        worker.kill()
    # Waiting on a human, the round is anyone's to step.
    store.rounds_of(open_wd(a)).save(
        state.__class__.from_dict({**state.to_dict(), "phase": "awaiting-approval"})
    )
    assert not advance._worker_elsewhere(
        open_wd(b), rounds_b, store.rounds_of(open_wd(b)).load("r1"), time.time()
    )


@pytest.mark.etcd
def test_timers_and_the_schedule_book_are_one_for_every_host(two: Hosts) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    timers.write(open_wd(a), "nightly", now=time.time(), every_s=3600)
    listed = run_looop("-C", str(b.root), "schedules", "--json")
    assert listed.returncode == 0 and "nightly" in listed.stdout, listed.stderr
    gone = run_looop("-C", str(b.root), "schedule", "drop", "nightly")
    assert gone.returncode == 0, gone.stderr
    assert timers.load_all(open_wd(a)) == {}
    assert not a.timers.exists() and not b.timers.exists()


@pytest.mark.etcd
def test_an_approved_move_runs_once_on_the_next_beat_of_any_host(
    two: Hosts, tmp_path: Path
) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    hold = {"move": {"action": "noop"}, "runs": "nothing"}
    ask = mailbox.open_ask(
        open_wd(a),
        prompt="run it?",
        asker="decider",
        now=1.0,
        kind=mailbox.AskKind.APPROVAL,
        hold=hold,
    )
    sealed = seal.sign(ask.id, ask.created_at, ask.asker, hold)  # as host a's approve seals it
    intent = {"v": 2, "ask": ask.id, "hold": hold, "digest": seal.digest(hold), "seal": sealed}
    shelf.write_json(open_wd(a).shelf, "approved", ask.id, intent)
    mailbox.answer(open_wd(b), ask.id, "approved", now=2.0, verdict="approved")
    events = approvals.carry_out_pending(open_wd(b), 3.0)
    assert events == []
    assert open_wd(a).shelf.names("approved") == []  # carried out once, gone for both hosts
    got = mailbox.get_answer(open_wd(a), ask.id)
    assert got is not None and got.note
    assert approvals.carry_out_pending(open_wd(a), 4.0) == []


@pytest.mark.etcd
def test_a_forged_approval_on_the_prefix_runs_on_no_host(two: Hosts, tmp_path: Path) -> None:
    """A writer of the etcd prefix writes ask, answer and intent that agree: no seal, no run."""
    a, b = two.workdir("a"), two.workdir("b")
    canary = tmp_path / "PWNED"
    hold = {"move": {"action": "run_shell", "cmd": f"touch {canary}"}, "runs": f"touch {canary}"}
    ask = mailbox.open_ask(
        open_wd(a), prompt="p", asker="decider", now=1.0, kind=mailbox.AskKind.APPROVAL, hold=hold
    )
    intent = {"v": 2, "ask": ask.id, "hold": hold, "digest": seal.digest(hold), "seal": "f" * 64}
    shelf.write_json(open_wd(a).shelf, "approved", ask.id, intent)
    mailbox.answer(open_wd(a), ask.id, "approved", now=2.0, verdict="approved")
    assert approvals.carry_out_pending(open_wd(b), 3.0) == []
    assert not canary.exists()
    assert open_wd(a).shelf.names("approved") == []
    assert open_wd(a).shelf.names("forged") == [ask.id]  # kept for the human, on every host


@pytest.mark.etcd
@pytest.mark.timeout(120)
def test_a_forged_round_answer_on_the_prefix_moves_no_round_on(two: Hosts, tmp_path: Path) -> None:
    """A writer of the etcd prefix answers a round's escalation "approved" itself: no host
    acts on it, it is kept as forged, and the human's own approval still does."""
    marker = tmp_path / "applied"
    a, b = sweep_hosts(two, f"touch {marker}")
    shared = open_wd(a).shelf

    def escalated() -> bool:
        if any(r.phase == "awaiting-approval" for r in store.rows(shared, include_done=False)):
            return True
        beat(open_wd(a))
        return False

    wait_for(escalated, 60, lambda: f"the escalation: {store.rows(shared, True)}", interval=0.05)
    (ask,) = [x for x in mailbox.pending(open_wd(b)) if x.kind is mailbox.AskKind.APPROVAL]
    forged = {"v": 1, "answer": "approved", "verdict": "approved", "by": "cli", "host": "b"}
    shelf.write_json(shared, "answers", ask.id, forged)
    hand_over(a)
    beat(open_wd(b))
    assert not marker.exists()
    (row,) = store.rows(shared, include_done=False)
    assert row.phase == "awaiting-approval"
    assert shared.names("forged") == [f"{ask.id}.answer"] and shared.get("answers", ask.id) is None
    approved = run_looop("-C", str(b.root), "approve", ask.id, "--json")
    assert approved.returncode == 0, approved.stderr
    hand_over(b)
    beat(open_wd(a))
    assert marker.exists()


class Usurped:
    """A decider during whose call the pulse passes to host b (host a's lease lapsed while it
    thought), and which then asks a human: the ask must not be written."""

    name = "usurped"

    def __init__(self, a: Paths, b: Paths) -> None:
        self.a, self.b = a, b

    def decide(self, request: DecideRequest) -> Decision:
        choose.coordinator(open_wd(self.a)).resign()  # as its lease expiring would
        with choose.coordinator(open_wd(self.b)).pulse():  # b beats, and keeps the pulse
            pass
        return Decision(move={"action": "ask_human", "prompt": "merge it?"})


@pytest.mark.etcd
def test_a_beat_that_lost_the_pulse_mid_beat_writes_no_record_and_says_why(two: Hosts) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    result = beat(open_wd(a), decider=Usurped(a, b))
    assert result.outcome is BeatOutcome.SKIPPED, (result.reason, result.move, result.journal)
    assert "lost the pulse at token" in (result.reason or "")
    assert mailbox.pending(open_wd(b)) == [] and open_wd(b).shelf.empty("asks")
    assert choose.coordinator(open_wd(b)).read_world() is None  # nor the world
    text = a.journal.read_text()
    assert "decided ask-human" in text and "not acted: lost the pulse at token" in text, text


@pytest.mark.etcd
def test_shared_memory_keeps_the_last_rounds_once_each_for_every_host(two: Hosts) -> None:
    from looop_py.engine.ports import MemoryEntry

    a, b = two.workdir("a"), two.workdir("b")
    mem_a, mem_b = store.memory_of(open_wd(a)), store.memory_of(open_wd(b))
    assert isinstance(mem_a, store.SharedMemory)
    for i in range(store.SHARED_KEEP + 5):
        entry = MemoryEntry("x" * (store.SHARED_CONTENT_CAP + 10), round_id=f"r{i}", created=i)
        (mem_a if i % 2 else mem_b).record("sweep", entry)
    mem_a.record("sweep", MemoryEntry("again", round_id=f"r{store.SHARED_KEEP + 4}"))  # a retry
    recalled = mem_b.recall("sweep", 100)
    assert [e.round_id for e in recalled] == [f"r{i}" for i in range(5, store.SHARED_KEEP + 5)]
    assert all(len(e.content) == store.SHARED_CONTENT_CAP for e in recalled)
    assert [e.round_id for e in mem_a.recall("sweep", 2)] == [
        f"r{store.SHARED_KEEP + i}" for i in (3, 4)
    ]
    # Each host keeps its own whole history, uncut.
    local = (a.memory / "sweep.jsonl").read_text().splitlines()
    assert len(local) == (store.SHARED_KEEP + 5) // 2


@pytest.mark.etcd
def test_shared_memory_forgets_expired_entries_on_every_host(two: Hosts) -> None:
    from looop_py.engine.ports import MemoryEntry

    a, b = two.workdir("a"), two.workdir("b")
    mem_a, mem_b = store.memory_of(open_wd(a)), store.memory_of(open_wd(b))
    now = time.time()
    mem_a.record("sweep", MemoryEntry("old", ("sweep",), created=now - 9, expires=now - 1))
    mem_a.record("sweep", MemoryEntry("fresh", ("sweep",), created=now, expires=now + 60))
    assert [e.content for e in mem_b.recall("sweep", 5)] == ["fresh"]  # never recalled …
    mem_b.record("sweep", MemoryEntry("next", ("sweep",), created=now + 1, expires=now + 60))
    shared = shelf.read_json(open_wd(b).shelf, "memory", "sweep", [])
    assert [d["content"] for d in shared] == ["fresh", "next"]  # … and pruned from the record
    assert all(d["id"].startswith("m-") for d in shared)
    ids = [e.id for e in mem_a.recall("sweep", 5)]
    assert ids == [d["id"] for d in shared]  # the same ids on both hosts


@pytest.mark.etcd
def test_an_unreachable_etcd_is_said_so_and_nothing_falls_back_to_files(tmp_path: Path) -> None:
    from tests.etcdserver import free_port

    wd = Hosts("etcd", tmp_path, None).workdir("a")
    use_etcd(wd.config, [f"http://127.0.0.1:{free_port()}"], "/looop/nowhere", TTL)
    for args in (("asks",), ("answer", "human-1", "yes"), ("approve", "human-1"), ("schedules",)):
        r = run_looop("-C", str(wd.root), *args, timeout=60)
        assert r.returncode == 3, (args, r.stdout, r.stderr)
        assert "etcd cannot be reached" in r.stderr and "corrupt" not in r.stderr
    asked = run_looop("-C", str(wd.root), "ask", "--prompt", "x", timeout=60)
    assert asked.returncode == 3, asked.stderr
    assert not wd.asks.exists() or not list(wd.asks.iterdir())  # nothing written locally


@pytest.mark.etcd
@pytest.mark.timeout(90)
def test_the_pulse_passing_between_hosts_wakes_no_decider(two: Hosts) -> None:
    """Host a runs a worker, host b none: each host's sessions are its own reading, carried
    by the other as last seen, so beats alternating between the hosts decide once each."""
    from looop_py.workers import kill, launch

    a, b = two.workdir("a"), two.workdir("b")
    launch.start(open_wd(a), "w1", "sleep 60", runtime="shell", now=time.time())
    try:
        outcomes = []
        for host in (a, b, a, b, a, b):
            outcomes.append(beat(open_wd(host), decider=Noop()).outcome)
            hand_over(host)  # the pulse passes (it would stay with a host that keeps beating)
    finally:
        kill.kill(a, "w1")
    decided = outcomes.count(BeatOutcome.DECIDED)
    assert outcomes[:2] == [BeatOutcome.DECIDED, BeatOutcome.DECIDED]  # each host's first
    assert decided == 2, outcomes
    committed = jsonio.loads(choose.coordinator(open_wd(a)).read_world() or b"{}")
    assert {"snap:sys-sessions@a", "snap:sys-sessions@b"} <= set(committed["items"])
    assert "snap:sys-sessions" not in committed["items"]


@pytest.mark.etcd
def test_a_stranded_ask_reads_stranded_on_every_host(two: Hosts) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    gone = subprocess.Popen(["true"])
    gone.wait()
    ask = mailbox.open_ask(open_wd(a), prompt="still there?", asker="human", now=1.0)
    mailbox._update(open_wd(a), ask.id, waiter={"pid": gone.pid, "create_time": 1.0})
    ((_, b_state, _),) = [(v.id, v.state, v.why) for v in mailbox.listing(open_wd(b))]
    assert b_state is mailbox.AskState.PENDING  # only host a can see its waiter is gone
    beat(open_wd(a), decider=Noop())  # a's beat finds it stranded and says so in the shared record
    (seen_b,) = mailbox.listing(open_wd(b))
    assert seen_b.state is mailbox.AskState.STRANDED and f"pid {gone.pid}" in (seen_b.why or "")


@pytest.mark.etcd
@pytest.mark.timeout(90)
def test_doctor_says_whether_etcd_answers_and_who_holds_the_pulse(
    two: Hosts, tmp_path: Path
) -> None:
    from looop_py.ops import doctor
    from tests.etcdserver import free_port

    a, b = two.workdir("a"), two.workdir("b")
    free = doctor.coordination(open_wd(a), time.time())
    assert free.verdict is doctor.Verdict.OK and "pulse free" in free.message
    assert "host a" in free.message
    with choose.coordinator(open_wd(b)).pulse() as token:
        held = run_looop("-C", str(a.root), "doctor", "--offline", "--json")
    (check,) = [c for c in jsonio.loads(held.stdout)["checks"] if c["name"] == "coordination"]
    assert check["verdict"] == "ok" and f"pulse held by b (epoch {token})" in check["message"]
    text = a.config.read_text()
    live = next(line for line in text.splitlines() if line.startswith("endpoints = "))
    a.config.write_text(text.replace(live, f'endpoints = ["http://127.0.0.1:{free_port()}"]'))
    down = run_looop("-C", str(a.root), "doctor", "--offline", "--json", timeout=60)
    assert down.returncode == 1, down.stdout
    (check,) = [c for c in jsonio.loads(down.stdout)["checks"] if c["name"] == "coordination"]
    assert check["verdict"] == "fail" and "cannot be reached" in check["message"]
    assert "never falls back" in check["fix"]
    files = Hosts("files", tmp_path / "f", None).workdir()
    assert doctor.coordination(open_wd(files), 0.0).message.startswith("files")


def _charge_many(root: str, start: int) -> None:
    from looop_py.spend import ledger

    paths = Paths(Path(root))
    for i in range(start, start + 25):
        ledger.record_charge(open_wd(paths), time.time(), ledger.Charge(f"k{i}", "workers", 1))


@pytest.mark.etcd
@pytest.mark.timeout(120)
def test_one_daily_budget_for_every_host(two: Hosts) -> None:
    from looop_py.spend import ledger

    a, b = two.workdir("a"), two.workdir("b")
    for wd in (a, b):
        text = wd.config.read_text().replace(
            "[decider]\n", "[limits]\ndaily_tokens = 1000\n[decider]\n"
        )
        wd.config.write_text(text)
    now = time.time()
    ledger.record_charge(open_wd(a), now, ledger.Charge("worker:w1", "workers", 600))
    assert ledger.held(open_wd(b), now) is None
    ledger.record_charge(open_wd(b), now, ledger.Charge("worker:w1", "workers", 400))  # b's own w1
    assert (
        ledger.load(open_wd(a)).tokens == 1000
    )  # two workers named alike on two hosts: both count
    assert "daily token budget spent: 1000 of 1000" in (ledger.held(open_wd(a), now) or "")
    ledger.record_charge(
        open_wd(b), now, ledger.Charge("worker:w1", "workers", 400)
    )  # b's again: once
    assert ledger.load(open_wd(b)).tokens == 1000
    assert not (a.state / "spend.json").exists() and not (b.state / "spend.json").exists()
    # Chargers on both hosts at once lose nothing: each charge swaps the record it read.
    open_wd(a).shelf, open_wd(b).shelf
    ctx = multiprocessing.get_context("fork")
    procs = [
        ctx.Process(target=_charge_many, args=(str((a, b)[n % 2].root), n * 25)) for n in range(4)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert ledger.load(open_wd(a)).tokens == 1100


class Broken:
    name = "broken"

    def decide(self, request: DecideRequest) -> Decision:
        from looop_py.deciders.base import DecideError

        raise DecideError("the model is down")


@pytest.mark.etcd
@pytest.mark.timeout(90)
def test_the_hourly_cap_and_the_backoff_hold_for_the_loop_not_each_host(
    two: Hosts, tmp_path: Path
) -> None:
    from tests.conftest import write_sensor

    counter = tmp_path / "n"
    counter.write_text("0")
    a, b = two.workdir("a"), two.workdir("b")
    for wd in (a, b):
        wd.config.write_text(
            wd.config.read_text().replace(
                "[decider]\n", "[limits]\ndecides_per_hour = 2\n[decider]\n"
            )
        )
        write_sensor(wd, "n", f"cat {counter}")

    def tick() -> None:  # the world every host sees changes
        counter.write_text(str(int(counter.read_text()) + 1))

    first = beat(
        open_wd(a), decider=Broken()
    )  # a's decider fails: the loop backs off, on every host
    assert first.outcome is BeatOutcome.FAILED
    tick()
    hand_over(a)
    held = beat(open_wd(b), decider=Noop())
    assert held.outcome is BeatOutcome.HELD and "backoff: 1 failure" in (held.reason or "")
    # The backoff is spent (edited here, as its delay passing would): b decides, then a, and
    # the cap of 2 an hour, counted across hosts, holds the third on b.
    limits_rec = open_wd(a).shelf.get("state", "backoff")
    assert limits_rec is not None and b"the model is down" in limits_rec
    open_wd(a).shelf.delete("state", "backoff")
    tick()
    assert beat(open_wd(b), decider=Noop()).outcome is BeatOutcome.DECIDED
    tick()
    hand_over(b)
    capped = beat(open_wd(a), decider=Noop())
    assert capped.outcome is BeatOutcome.HELD, capped
    assert "decide cap: 2 decides in the last hour (limit 2)" in (capped.reason or "")
    assert not (a.state / "decides.json").exists() and not (b.state / "backoff.json").exists()


@pytest.mark.etcd
def test_when_each_goal_was_last_acted_on_is_the_same_on_every_host(two: Hosts) -> None:
    from looop_py.moves import act
    from looop_py.sensing import probes

    a, b = two.workdir("a"), two.workdir("b")
    act.stamp_goal(open_wd(a), "welcome", 1234.0)
    seen = probes.Seen(open_wd(b), 2000.0, ("welcome",))
    assert probes.goals(seen)["detail"]["goals"]["welcome"] == {"last_acted": 1234.0}
    assert not (a.goal_activity.exists() or b.goal_activity.exists())


@pytest.mark.etcd
@pytest.mark.timeout(60)
def test_status_on_one_host_shows_the_shared_world_pulse_and_claims(two: Hosts) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    done = beat(open_wd(b), decider=Noop())  # host b commits; host a's local mirror knows nothing
    assert done.outcome is BeatOutcome.DECIDED
    choose.coordinator(open_wd(b)).claim("repo", holders.own_holder("me"), now=time.time())
    with choose.coordinator(open_wd(b)).pulse() as token:
        got = run_looop("-C", str(a.root), "status", "--json")
        text = run_looop("-C", str(a.root), "status")
    assert got.returncode == 0, got.stderr
    view = jsonio.loads(got.stdout)
    assert view["coordination"] == {
        "backend": "etcd",
        "host": "a",
        "pulse": {"host": "b", "epoch": token, "since": view["coordination"]["pulse"]["since"]},
        "claims": 1,
        "error": None,
    }
    assert view["world_hash"] == done.world_hash and view["counts"]["claims"] == 1
    since = view["coordination"]["pulse"]["since"]
    assert since and since.startswith("20")
    said = f"etcd as host a; the shared pulse is held by b since {since} (epoch {token})"
    assert said in text.stdout
    files = run_looop(
        "-C", str(Hosts("files", a.root.parent / "f", None).workdir().root), "status", "--json"
    )
    assert jsonio.loads(files.stdout)["coordination"] == {"backend": "files"}


PULSE_LOOP = """
import json, subprocess, sys, time
root, until, log = sys.argv[1], float(sys.argv[2]), sys.argv[3]
with open(log, "a") as out:
    while time.time() < until:
        done = subprocess.run(
            [sys.executable, "-m", "looop_py", "-C", root, "pulse", "--json"],
            capture_output=True, text=True,
        )
        try:
            outcome = json.loads(done.stdout)["outcome"]
        except ValueError:
            outcome = "unreadable: " + (done.stdout + done.stderr).replace("\\n", " ")[:200]
        out.write(f"{done.returncode} {outcome}\\n")
        out.flush()
        time.sleep(0.05)
"""


@pytest.mark.etcd
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_hosts_beating_at_once_run_an_approved_round_action_exactly_once(
    two: Hosts, tmp_path: Path
) -> None:
    """Both hosts run `looop pulse` back to back, as cron on two machines would, while a
    loop round escalates and a human approves it on one of them: one round, its action run
    once, every beat decided, skipped or locked, never failed."""
    marker = tmp_path / "applied"
    dirs = a, b = sweep_hosts(two, f"echo ran >> {marker}")
    until = time.time() + 60
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    loops = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                PULSE_LOOP,
                str(wd.root),
                str(until),
                str(tmp_path / f"{i}.log"),
            ],
            env=env,
        )
        for i, wd in enumerate(dirs)
    ]
    try:
        wait_for(
            lambda: [x for x in mailbox.pending(open_wd(b)) if x.kind is mailbox.AskKind.APPROVAL],
            timeout=45,
            what="the round's approval",
        )
        (ask,) = [x for x in mailbox.pending(open_wd(b)) if x.kind is mailbox.AskKind.APPROVAL]
        approved = run_looop("-C", str(b.root), "approve", ask.id)
        assert approved.returncode == 0, approved.stderr
        wait_for(
            lambda: any(r.phase == "done" for r in store.rows(open_wd(a).shelf, include_done=True)),
            timeout=30,
            what="the round to finish",
        )

        def beats() -> list[int]:
            return [len((tmp_path / f"{i}.log").read_text().splitlines()) for i in range(2)]

        # A few more beats on both hosts: nothing may run it again.
        before = beats()
        wait_for(
            lambda: all(n >= m + 3 for n, m in zip(beats(), before, strict=True)),
            30,
            "3 more beats on each host",
        )
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert marker.read_text().splitlines() == ["ran"]
    (done,) = store.rows(open_wd(b).shelf, include_done=True)
    assert done.outcome == "proceeded"
    beats = [line for i in range(2) for line in (tmp_path / f"{i}.log").read_text().splitlines()]
    outcomes = {line.split(" ", 1)[1] for line in beats}
    assert outcomes <= {"decided", "skipped", "locked"}, outcomes
    assert all(line.startswith("0 ") for line in beats)  # exit 0 each: cron stays quiet
    assert "locked" in outcomes and len(beats) >= 10  # they really did contend


@pytest.mark.etcd
@pytest.mark.timeout(60)
def test_looop_up_acts_on_an_answer_given_on_another_host_at_once(two: Hosts) -> None:
    from tests.ops.test_resident import beats

    a, b = two.workdir("a"), two.workdir("b")
    ask = mailbox.open_ask(open_wd(a), prompt="go?", asker="decider", now=time.time())
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
    up = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(a.root), "up", "--interval", "3600"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        wait_for(lambda: beats(a) >= 1, timeout=20, what="the first beat")
        time.sleep(0.5)
        start = time.monotonic()
        mailbox.answer(
            open_wd(b), ask.id, "yes", now=time.time()
        )  # on host b: a's disk is untouched
        wait_for(lambda: beats(a) >= 2, timeout=5, what="host a's beat after b's answer")
        reacted = time.monotonic() - start
    finally:
        up.kill()
        up.wait()
    assert reacted < 2.0, f"reacted in {reacted:.2f} s"  # not the hour's interval
