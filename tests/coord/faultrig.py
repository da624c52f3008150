"""The fault rig: hosts beating one loop on a real etcd, and a count of what they did that
trusts nothing looop says — an act log the side effect itself appends to.

Each host is a work dir on one prefix with its own host id and a command decider
(`decide.sh`) that proposes `act.sh ID SLEEP`, an allowlisted run_shell. `decide.sh`
leaves the beating process's pid in `deciding.HOST` (so a test can SIGSTOP it inside
the decide); `act.sh` appends `start ID HOST FENCE T DEADLINE` when it starts and
`end ID T` when it ends. `count` reads that log: how many acts, how many started after
their token's renew deadline, how many started after a newer token had already acted
(a stale holder's side effect overlapping the new holder's), and decisions (by the id their
decide gave the act) started twice. A token spans many beats (the pulse sticks to its
holder: coord/election.py), so acts under one token are many decisions, not one twice.
Used by tests/coord/test_faults.py and bench/fence.py (the before/after figures).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from looop_py.workdir.template import init
from tests.etcdserver import use_etcd

DECIDE = """#!/bin/sh
# The beating looop process: this script's parent, or the shell's parent if bash forked.
p=$PPID
grep -q pulse /proc/$p/cmdline 2>/dev/null || p=$(ps -o ppid= -p $p | tr -d ' ')
echo $p > {tmp}/deciding.$HOST.tmp && mv {tmp}/deciding.$HOST.tmp {tmp}/deciding.$HOST
sleep {decide_s}
n=$(cat /proc/sys/kernel/random/uuid | cut -c1-8)
printf '{{"action":"run_shell","cmd":"{tmp}/act.sh %s-%s {act_s}"}}\\n' "$HOST" "$n"
"""

ACT = """#!/bin/sh
echo "start $1 $HOST ${{LOOOP_FENCE:--}} $(date +%s.%N) ${{LOOOP_FENCE_DEADLINE:-inf}}" >> {log}
sleep "$2"
echo "end $1 $(date +%s.%N)" >> {log}
"""


@dataclass
class Act:
    id: str
    host: str
    token: int | None
    start: float
    deadline: float
    end: float | None = None


@dataclass
class Count:
    acts: list[Act] = field(default_factory=list)
    starts: dict[str, int] = field(default_factory=dict)  # act id -> how often it started

    @property
    def late(self) -> list[Act]:
        """Acts started after their holder's renew deadline."""
        return [a for a in self.acts if a.start > a.deadline]

    @property
    def stale(self) -> list[Act]:
        """Acts that started after an act under a newer token had started: side effects of
        a holder that had lost the pulse, overlapping its successor's."""
        first: dict[int, float] = {}
        for a in self.acts:
            if a.token is not None:
                first[a.token] = min(first.get(a.token, a.start), a.start)
        return [
            a
            for a in self.acts
            if a.token is not None and any(t > a.token and s < a.start for t, s in first.items())
        ]

    @property
    def twice(self) -> list[str]:
        """Decisions (act ids, one per decide) whose act started more than once."""
        return sorted(i for i, n in self.starts.items() if n > 1)

    def by_host(self, host: str) -> list[Act]:
        return [a for a in self.acts if a.host == host]


def count(log: Path) -> Count:
    acts: dict[str, Act] = {}
    starts: dict[str, int] = {}
    if not log.exists():
        return Count()
    for line in log.read_text().splitlines():
        word = line.split()
        if word[0] == "start" and len(word) == 6:
            fence = word[3].rpartition(":")[2]
            token = int(fence) if fence.isdigit() else None
            acts[word[1]] = Act(word[1], word[2], token, float(word[4]), float(word[5]))
            starts[word[1]] = starts.get(word[1], 0) + 1
        elif word[0] == "end" and word[1] in acts:
            acts[word[1]].end = float(word[2])
    return Count(sorted(acts.values(), key=lambda a: a.start), starts)


class Rig:
    """Host work dirs on one etcd prefix, all proposing the act script every beat."""

    def __init__(
        self, tmp: Path, endpoints: list[str], prefix: str, ttl: float = 2.0, code: str = ""
    ) -> None:
        """`code`: a looop_py source tree the hosts run instead of this one (bench/fence.py
        measures a checkout from before the fence this way)."""
        self.tmp, self.endpoints, self.prefix, self.ttl = tmp, endpoints, prefix, ttl
        self.code = code
        self.log = tmp / "acts.log"
        self.hosts: dict[str, Path] = {}
        self.cut: set[str] = set()  # hosts partitioned: their commands run in a netns of their own

    def scripts(self, decide_s: float = 0.0, act_s: float = 0.0) -> None:
        (self.tmp / "decide.sh").write_text(
            DECIDE.format(tmp=self.tmp, decide_s=decide_s, act_s=act_s)
        )
        (self.tmp / "act.sh").write_text(ACT.format(log=self.log))
        for name in ("decide.sh", "act.sh"):
            (self.tmp / name).chmod(0o755)

    def host(self, name: str) -> Path:
        if name not in self.hosts:
            root = init(self.tmp / f"host-{name}").root
            for script in (root / "sensors").glob("*.sh"):
                script.unlink()
            (root / "looop.toml").write_text(
                f'[decider]\nbackend = "command"\ncommand = "{self.tmp}/decide.sh"\n'
                f'\n[gates]\nshell_allow = ["{self.tmp}/act.sh *"]\n'
                "\n[limits]\ndecides_per_hour = 0\n"
            )
            use_etcd(root / "looop.toml", self.endpoints, self.prefix, self.ttl)
            self.hosts[name] = root
        return self.hosts[name]

    def env(self, name: str) -> dict[str, str]:
        """Host `name`'s environment: its host id, and a machine identity of its own (the
        hosts are processes on one machine here); `name` `x~y` is host id x on machine y."""
        env = {k: v for k, v in os.environ.items() if k != "LOOOP_DIR"}
        host, _, machine = name.partition("~")
        env.update(LOOOP_HOST_ID=host, HOST=host, LOOOP_MACHINE_ID=f"machine-{machine or host}")
        if self.code:
            env["PYTHONPATH"] = self.code
        return env

    def pulse(self, name: str, *args: str) -> subprocess.Popen[str]:
        """One forced beat of host `name`, started in the background (or another command)."""
        command = list(args) or ["pulse", "--force"]
        netns = ["unshare", "--net"] if name in self.cut else []  # no route to anyone
        return subprocess.Popen(
            [*netns, sys.executable, "-m", "looop_py", "-C", str(self.host(name)), *command],
            env=self.env(name),
            cwd=self.tmp,  # not a checkout: `-m` puts the current directory first on the path
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def beat(self, name: str, *args: str, timeout: float = 30) -> tuple[int, str]:
        proc = self.pulse(name, *args)
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out + err

    def deciding(self, name: str, timeout: float = 20) -> int:
        """The pid of host `name`'s beat once it is inside its decide."""
        path = self.tmp / f"deciding.{name}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists():
                pid = int(path.read_text())
                path.unlink()
                return pid
            time.sleep(0.02)
        raise TimeoutError(f"host {name} never reached its decide")

    def acting(self, name: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(a.host == name and a.end is None for a in count(self.log).acts):
                return
            time.sleep(0.02)
        raise TimeoutError(f"host {name} never started an act")

    def journal(self, name: str) -> str:
        path = self.host(name) / "journal.md"
        return path.read_text() if path.exists() else ""


def netns_missing() -> str | None:
    """Why a host cannot be partitioned with a network namespace here (None: it can)."""
    import shutil

    if shutil.which("unshare") is None:
        return "unshare is not installed"
    tried = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
    if tried.returncode != 0:
        return f"unshare --net is not allowed here: {tried.stderr.strip()[:200]}"
    return None


def paused(pid: int, seconds: float) -> None:
    """SIGSTOP `pid` for `seconds` (a GC pause, a VM migration, a laptop lid), then resume."""
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
