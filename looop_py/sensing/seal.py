"""The seal: what a full beat vouches for, so the next one can prove nothing changed.

A full beat that ends with its world committed (skipped, or decided and
committed) writes `state/quiet-seal`: a survey of every file its outcome
depended on (looop.toml, PLAYBOOK.md, each sensor script, the goals as one digest
of their names and stats, the snapshots, the committed world, and the directories
whose emptiness lets a beat skip its housekeeping and keeps the probes' signals
constant), what the sensors' environment derives from, and for each sensor a
digest of its raw run (exactly the bytes normalization reads) and of its signal
item, so a run whose detail churned while its signal held is checked by parsing
that one output (sensing/steady.py), not by a full beat. beat/quiet.py checks it.

It seals only what it verified: the goals, PLAYBOOK and sensor headers are the files
SENSE read (the stat they held then is the surveyed one, or the goals are surveyed as
the beat listed them: `goals_listed`, workdir/listing.py; else each is re-read, stable
before and after, and must hash to the world's item), every probe said what it says
of an empty work dir, and no goal is a loop. Anything it cannot vouch for leaves no
seal: the next beat is a full one. This module alone reads and writes the seal; at
import it loads nothing a quiet beat does not use (no pathlib, JSON, enum or subprocess).
"""

from __future__ import annotations

import os
import sys

from looop_py import __version__, logfile, procs
from looop_py.sensing.survey import (
    ANSWERS,
    ASKS,
    CLAIMS,
    FILES,
    MUST_BE_ABSENT,
    ROUNDS,
    SNAPSHOTS,
    read_stable,
    survey,
)
from looop_py.world import digest

# typing is not imported at run time: a quiet beat is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any, Protocol

    from looop_py.workdir.config import Config
    from looop_py.workdir.goalfile import GoalFile

    # What the writer reads of sense.World, sense.Committed and sensors.Reading
    # (named structurally: sensors imports this module).
    class Reading(Protocol):
        @property
        def stem(self) -> str: ...
        @property
        def cached(self) -> bool: ...
        @property
        def raw_digest(self) -> str | None: ...
        @property
        def ok(self) -> bool: ...
        @property
        def error_code(self) -> Any: ...

    class World(Protocol):
        @property
        def items(self) -> dict[str, str]: ...
        @property
        def hash(self) -> str: ...
        @property
        def readings(self) -> Sequence[Reading]: ...
        @property
        def read(self) -> dict[str, tuple[str, float, float]]: ...
        @property
        def goals(self) -> Sequence[GoalFile]: ...

    # A probe's signal now, each process it rests on (pid, create time; None: a record
    # alone), when the first of its records expires: what beat/vouch.py tells the writer.
    Holders = tuple[str, list[tuple[int, float] | None], float]
    # The same for live workers, with each one's output log and its mtime (ns) then:
    # health turns `stuck` only from that mtime on, so it may grow but never shrink.
    Sessions = tuple[str, float, list[tuple[int, float]], list[tuple[str, int]]]

    class Committed(Protocol):
        @property
        def hash(self) -> str | None: ...
        @property
        def at(self) -> float | None: ...
        @property
        def action(self) -> str | None: ...
        @property
        def next_wake(self) -> float | None: ...


SEAL = "state/quiet-seal"
FORMAT = f"looop-quiet-seal 5 {__version__}"
HEADER_LINES = 20


# What each probe signals about a work dir where the directories above are
# empty and no goal is a loop; a beat whose probes said anything else is not sealed.
QUIET_PROBES = {
    "snap:sys-sessions": "[]",
    "snap:sys-claims": "[]",
    "snap:sys-goals": "{}",
    "snap:sys-asks": '{"pending":[]}',
    "snap:sys-schedules": "{}",
    "snap:sys-rounds": '{"awaiting-approval":[],"reports":{}}',
}


# -- read by both kinds of beat ---------------------------------------------------


def parse_header(head: bytes) -> dict[str, float]:
    """`# looop:timeout=N` / `# looop:interval=N` within the first lines of a script.

    The grammar of `^\\s*#\\s*looop:(timeout|interval)\\s*=\\s*(\\d+(\\.\\d+)?)\\s*$`,
    without importing re.
    """
    found: dict[str, float] = {}
    for line in head.splitlines()[:HEADER_LINES]:
        text = line.strip()
        if not text.startswith(b"#"):
            continue
        text = text[1:].lstrip()
        if not text.startswith(b"looop:"):
            continue
        key, eq, value = text[6:].partition(b"=")
        key, value = key.rstrip(), value.strip()
        if not eq or key not in (b"timeout", b"interval"):
            continue
        whole, dot, frac = value.partition(b".")
        if whole.isdigit() and (not dot or frac.isdigit()):
            found[key.decode()] = float(value)
    return found


def fresh(snapshot_mtime: float, script_mtime: float, interval_s: float, now: float) -> bool:
    """May an interval sensor's stored snapshot stand in for a run? Taken after the
    script's last edit, and younger than its interval."""
    return snapshot_mtime >= script_mtime and now - snapshot_mtime < interval_s


def raw_digest(raw: procs.Result, timeout_s: float, cap: int) -> str:
    """A digest of everything sensor normalization reads of one run.

    Two runs with one digest normalize to the same snapshot: stdout when the
    sensor exited 0 (only its size when past the cap), else the exit, the
    timeout and the stderr tail that the error snapshot quotes.
    """
    if raw.returncode == 0 and not raw.timed_out:
        body = b"big %d" % raw.stdout_bytes if raw.stdout_bytes > cap else b"out " + raw.stdout
    else:
        status = (raw.returncode, raw.spawn_errno, raw.timed_out, raw.exit_code)
        body = b"err %r " % (status,) + raw.stderr_tail
    return digest(b"%r %d " % (timeout_s, cap) + body)


def env_key(env: Mapping[str, str]) -> str:
    """What the sensors' environment is derived from, beyond the environment itself:
    the names (which ones are secrets to scrub) and how looop was started (LOOOP_BIN).
    A changed value reaches the sensors in both kinds of beat, and their digests."""
    names = "\0".join(sorted(env))
    started = f"{env.get('PATH', '')}\0{sys.argv[0] if sys.argv else ''}\0{sys.executable}"
    return digest(f"{names}\0\0{started}".encode())


# -- the seal ------------------------------------------------------------------


def break_seal(root: str) -> None:
    """A full beat starts here: whatever it changes, no old seal may vouch for it."""
    try:
        os.unlink(os.path.join(root, SEAL))
    except FileNotFoundError:
        pass


def seal(
    root: str,
    cfg: Config,
    world: World,
    committed: Committed,
    *,
    removed_env: Iterable[str],
    looop_bin: str,
    loop_wake: float | None,
    rounds_now: Callable[[], Holders | None],
    sessions_now: Callable[[], Sessions | None],
    claims_now: Callable[[], Holders | None] = lambda: None,
    asks_now: Callable[[], Holders | None] = lambda: None,
    shared_now: Callable[[], str | None] = lambda: None,
    sessions_key: str = "snap:sys-sessions",
    goals_listed: Callable[[], tuple[str, str, dict[str, str]] | None] = lambda: None,
) -> str | None:
    """Write the seal after a full beat whose world is committed; None when sealed,
    else why not (for tests). Never raises for what it finds.

    `loop_wake`: when the first loop cadence falls due (inf: none; None: not known).
    `rounds_now`: sys-rounds now, each round's running worker, the first clock-borne step.
    `sessions_now`: the sys-sessions signal now, the first time it may change by the
    clock alone (an ended session pruned, a live one turning stuck), each live worker
    (pid, create time) and its output log's mtime; None while one is not settled.
    `claims_now`: the sys-claims signal now, each claim's holder (pid, create time) and
    when the first claim expires; None while a claim is not plainly held by a live
    process (a round's, unreadable); on a shared backend a claim goes with its lease.
    `asks_now`: the sys-asks signal now and the process waiting on each pending ask;
    None while a record does not fit, or (shared) an approval waits to be carried out.
    `shared_now`: a shared backend's fingerprint line if its keys did not change while the
    beat ran (coord/etcdseal.py). `sessions_key`: this host's sessions item (NAME@HOST there).
    """
    why = _unsealable(cfg, world, committed, loop_wake)
    if why:
        return why
    goal_stats: dict[str, str] = {}  # the survey keeps one digest of them: checked here
    lines = survey(root, goal_stats, listed := goals_listed())
    held = {line.split(" ")[1] for line in lines if line.startswith("e ") and line.endswith(" 1")}
    if held - {CLAIMS, ASKS, ANSWERS, ROUNDS}:
        return "a worker, approval, timer or round exists"
    records = [
        ln.split(" ")[1] for ln in lines if ln.startswith(("f claims/", "f ask", "f ans", "r "))
    ]
    if any(not rel.endswith(".json") or "/." in rel for rel in records):
        return "a records folder holds a file that is no record"
    shared = cfg.coordination.backend != "files"  # claims kept there: CLAIMS is empty here
    claims = claims_now() if CLAIMS in held or shared else ("[]", [], float("inf"))
    if claims is None:
        return "a claim is not plainly held by a live process"
    if len(claims[1]) != sum(rel.startswith(f"{CLAIMS}/") for rel in records):
        return "the claims changed while the beat ran"
    if world.items.get("snap:sys-claims") != claims[0]:
        return "the claims changed while the beat ran"
    no_asks: Holders = (QUIET_PROBES["snap:sys-asks"], [], 0.0)  # on etcd: keys, asked
    asks = asks_now() if held & {ASKS, ANSWERS} or shared else no_asks
    if asks is None:
        return "an ask or answer does not fit, or an approval waits to be carried out"
    if world.items.get("snap:sys-asks") != asks[0]:
        return "the asks changed while the beat ran"
    stats = {ln.split(" ")[1]: ln.split(" ", 2)[2] for ln in lines if ln.startswith("f ")}
    stats.update(goal_stats)
    if any(stats[FILES[k]] == "-" for k in ("config", "last_world")) or any(
        stats[FILES[k]] != "-" for k in MUST_BE_ABSENT
    ):
        return "the committed world is missing, or a move or step left a record"
    rounds = rounds_now()  # read after the survey: it holds
    if rounds is None or world.items.get("snap:sys-rounds") != rounds[0]:
        return "a round waits on more than its running worker, or the rounds changed"
    sessions = sessions_now()  # after the survey too
    if sessions is None:
        return "a worker session is not settled, or its health may change"
    if world.items.get(sessions_key) != sessions[0]:
        return "the workers changed while the beat ran"
    why = _verify_texts(root, world, stats, listed is not None and listed[2] == goal_stats)
    if why:
        return why
    sensor_lines = []
    cap = cfg.sensors.max_bytes
    for reading in world.readings:
        name = reading.stem.removeprefix("sensor-")
        rel = f"sensors/{name}.sh"
        if (read := world.read.get(rel)) is not None and read[0] == stats.get(rel):
            timeout, interval = read[1:]  # discovery read this very header
        else:
            header = _read_header(root, rel, stats)
            if header is None:
                return f"sensor {name} changed while the beat ran"
            timeout = header.get("timeout", cfg.sensors.timeout_s)
            interval = header.get("interval") or 0.0
        if reading.raw_digest is None and not reading.cached:
            return f"sensor {name} did not run (refused)"
        error = "-" if reading.ok else logfile.json_literal(reading.error_code)
        item = world.items.get(f"snap:{reading.stem}")
        signal = digest(item.encode()) if item is not None else "-"
        fields = (name, repr(timeout), repr(interval), reading.raw_digest or "-", signal, error)
        sensor_lines.append("sensor " + " ".join(fields))
    until = min(_until(committed, cfg.limits.noop_ttl_s), loop_wake or 0.0, sessions[1])
    until = min(until, claims[2], rounds[2])  # an expired claim is reaped by a full beat
    fingerprint = shared_now() if shared else "-"
    if fingerprint is None:
        return "the shared keys changed while the beat ran, or cannot be fingerprinted"
    env, holders = dict(os.environ), [*claims[1], *asks[1], *sessions[2], *rounds[1]]
    removed = sorted(set(removed_env) & set(env))
    text = "\n".join(
        [
            FORMAT,
            f"hash {world.hash}",
            f"until {until!r}",
            f"run {cap} {cfg.sensors.concurrency}",
            f"env {env_key(env)} {looop_bin}",
            "scrub " + " ".join(removed),
            "holders " + " ".join(f"{p}:{t!r}" for p, t in dict.fromkeys(filter(None, holders))),
            f"shared {fingerprint}",
            "outputs " + " ".join(f"{rel}:{ns}" for rel, ns in sessions[3]),
            *sensor_lines,
            "survey",
            *lines,
        ]
    )
    try:
        write(root, text + "\n")
    except OSError as exc:
        return f"cannot write the seal: {exc}"
    return None


def write(root: str, text: str) -> None:
    """Replace the seal (no fsync: losing a seal costs one full beat)."""
    tmp = os.path.join(root, f"{SEAL}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(root, SEAL))


def _unsealable(
    cfg: Config, world: World, committed: Committed, loop_wake: float | None
) -> str | None:
    if committed.hash != world.hash:
        return "the world is not committed"
    if loop_wake is None:
        return "a loop's next slot is not known"
    if cfg.notify.command:
        return "a [notify] command is configured"
    if not world.hash or " " in world.hash:
        return "no world hash"
    for key, value in ((k.split("@")[0], v) for k, v in world.items.items() if k[:5] != "goal:"):
        if key in ("snap:sys-rounds", "snap:sys-sessions", "snap:sys-claims", "snap:sys-asks"):
            continue  # rounds, ended workers, live claims and asks are files: probed again
        if key.startswith("snap:sys-") and QUIET_PROBES.get(key) != value:
            return f"probe {key[9:]} has something to say"
        if key.startswith("snap:sensor-") or key in ("playbook",) or key.startswith("goal:"):
            continue
        if key not in QUIET_PROBES:
            return f"an item the seal does not know: {key}"
    if len({k.split("@")[0] for k in world.items if k[:9] == "snap:sys-"}) != len(QUIET_PROBES):
        return "a probe is missing"
    return None


def _verify_texts(root: str, world: World, stats: dict[str, str], vouched: bool) -> str | None:
    """The goals and PLAYBOOK on disk are what the world hashed, unchanged since the survey
    (`vouched`: its goals are the listing's, each at the stat SENSE hashed it at)."""
    rels = () if vouched else stats
    goal_files = sorted(k for k in rels if k.startswith("goals/") and k.endswith(".md"))
    goal_items = {k[5:]: v for k, v in world.items.items() if k[:5] == "goal:"} if rels else {}
    if len(goal_files) != len(goal_items):
        return "the goals on disk are not the goals the world holds"
    held = {g.id: g.stamp for g in world.goals} if goal_files else {}  # stats while SENSE read
    for rel in goal_files:
        if held.get(goal_id := rel[6:-3]) == stats[rel]:
            continue  # the bytes SENSE hashed are the file the survey found: not read again
        body = read_stable(root, rel, stats)
        if body is None or goal_items.get(goal_id) != digest(body):
            return f"goal {goal_id} changed while the beat ran"
    playbook = world.items.get("playbook")
    if playbook is None:
        return None if stats.get(FILES["playbook"]) == "-" else "PLAYBOOK.md appeared"
    if world.read.get(FILES["playbook"], ("",))[0] == stats.get(FILES["playbook"]):
        return None
    body = read_stable(root, FILES["playbook"], stats)
    if body is None or playbook != digest(body):
        return "PLAYBOOK.md changed while the beat ran"
    return None


def _read_header(root: str, rel: str, stats: dict[str, str]) -> dict[str, float] | None:
    head = read_stable(root, rel, stats, 4096)
    return None if head is None else parse_header(head)


def _until(committed: Committed, noop_ttl_s: float) -> float:
    """When a beat must decide although nothing changed (next_interval_s, noop TTL)."""
    until = float("inf")
    if committed.next_wake is not None:
        until = committed.next_wake
    if noop_ttl_s > 0 and committed.action == "noop" and committed.at is not None:
        until = min(until, committed.at + noop_ttl_s)
    return until


class Sealed:
    """The seal as read back; ValueError or IndexError for one that is not whole."""

    def __init__(self, text: str) -> None:
        head, sep, rest = text.partition("\nsurvey\n")
        lines = head.split("\n")
        if not sep or lines[0] != FORMAT or len(lines) < 9:
            raise ValueError("not a seal of this looop")
        self.survey = rest.rstrip("\n").split("\n")
        self.hash = lines[1].removeprefix("hash ")
        self.until = float(lines[2].removeprefix("until "))
        _, cap, concurrency = lines[3].split(" ")
        self.cap, self.concurrency = int(cap), int(concurrency)
        _, self.env, self.bin = lines[4].split(" ", 2)
        self.scrub = lines[5].split(" ")[1:]
        word, _, held = lines[6].partition(" ")
        if word != "holders":
            raise ValueError("not a holders line")
        pairs = (h.split(":") for h in held.split(" ") if h)
        self.holders = [(int(pid), float(created)) for pid, created in pairs]
        if not lines[7].startswith("shared "):
            raise ValueError("not a shared line")
        self.shared = None if lines[7] == "shared -" else lines[7][7:]  # coord/etcdseal.py's
        word, _, logs = lines[8].partition(" ")
        if word != "outputs":
            raise ValueError("not an outputs line")
        outs = (o.rsplit(":", 1) for o in logs.split(" ") if o)
        self.outputs = [(rel, int(ns)) for rel, ns in outs]  # a live worker's log, its mtime
        if any(not rel.startswith("sessions/") or "/." in rel for rel, _ in self.outputs):
            raise ValueError("an output log outside sessions/")
        self.sensors: list[tuple[str, float, float, str, str]] = []
        self.signals: dict[str, str] = {}  # sensor name → digest of its world item
        scripts = {ln.split(" ")[1] for ln in self.survey if ln.startswith("f sensors/")}
        for line in lines[9:]:
            word, name, timeout, interval, raw, signal, error = line.split(" ", 6)
            if word != "sensor":
                raise ValueError("not a sensor line")
            if "/" in name or f"sensors/{name}.sh" not in scripts:
                # A seal runs only scripts it surveyed in sensors/, whoever wrote it.
                raise ValueError(f"sensor {name!r} is not a surveyed script")
            self.sensors.append((name, float(timeout), float(interval), raw, error))
            self.signals[name] = signal
        self.text = text

    def steadied(self, digests: dict[str, str], snapshots: dict[str, str], folder: str) -> str:
        """This seal's text with new raw digests for sensors whose signal held, new survey
        lines for the snapshots the quiet beat rewrote (by work-dir relative name) and
        for the snapshots folder they were renamed into (`folder`: its stat text)."""
        head, _, _ = self.text.partition("\nsurvey\n")
        lines = head.split("\n")
        for i, line in enumerate(lines[9:], 9):
            word, name, rest = line.split(" ", 2)
            if name in digests:
                timeout, interval, _, more = rest.split(" ", 3)
                lines[i] = " ".join((word, name, timeout, interval, digests[name], more))
        survey_lines = [
            f"s {rel} {snapshots[rel]}"
            if line.startswith("s ") and (rel := line.split(" ")[1]) in snapshots
            else (f"f {SNAPSHOTS} {folder}" if line.startswith(f"f {SNAPSHOTS} ") else line)
            for line in self.survey
        ]
        return "\n".join([*lines, "survey", *survey_lines]) + "\n"


def read(root: str) -> Sealed | None:
    """The seal, or None: none, damaged, or another version's."""
    try:
        with open(os.path.join(root, SEAL), encoding="utf-8") as f:
            return Sealed(f.read())
    except (OSError, ValueError, IndexError):
        return None
