"""The sticky pulse: one host holds the pulse across beats (coord/election.py).

Rainy first: the pulse of a host id taken on another machine is refused, not adopted; a
second work dir of one host steps aside; the other hosts' pulses take nothing (one etcd
read, counted by etcd itself) and say who holds it since when; the holder's death hands
the pulse over within the TTL and a beat, `looop down` at once. Then the happy path: the
holder's token stays the same beat after beat, and `looop up` keeps it between beats.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py.coord import choose
from looop_py.coord.base import PULSE
from looop_py.workdir.paths import Paths
from tests.conftest import close_opened, open_wd, run_looop, wait_for
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_shared_records import Hosts
from tests.etcdserver import Cluster

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(90)]

# Long enough that a holder's next `looop pulse` process (a few seconds apart on a loaded
# machine) comes before its lease lapses: the pulse sticks between processes.
TTL = 10.0
SHORT_TTL = 3.0  # where the holder is `looop up`, which keeps it alive between beats


@pytest.fixture
def two(etcd: Cluster, tmp_path: Path) -> Iterator[Hosts]:
    yield Hosts("etcd", tmp_path, etcd, ttl=TTL)
    close_opened()


@pytest.fixture
def quick(etcd: Cluster, tmp_path: Path) -> Iterator[Hosts]:
    yield Hosts("etcd", tmp_path, etcd, ttl=SHORT_TTL)
    close_opened()


def pulse(wd: Paths, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    """`looop pulse --json` in its own process, as cron runs it: (exit, JSON, stderr)."""
    r = run_looop("-C", str(wd.root), "pulse", "--json", *args, env=env)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else {}, r.stderr + r.stdout


def token(wd: Paths) -> int | None:
    """The pulse's token (its key's create revision) as etcd has it now, None when free."""
    view = choose.coordinator(open_wd(wd)).get(PULSE, time.time())
    return view.claim.epoch if view and view.claim else None


def grpc_calls(cluster: Cluster) -> dict[str, int]:
    """etcd's own count of the requests it handled, by method (its /metrics)."""
    with urllib.request.urlopen(cluster.endpoints[0] + "/metrics", timeout=5) as r:
        text = r.read().decode()
    found: dict[str, int] = {}
    for m in re.finditer(r'grpc_server_handled_total\{[^}]*grpc_method="(\w+)"[^}]*\} (\d+)', text):
        found[m[1]] = found.get(m[1], 0) + int(m[2])
    return found


def test_the_pulse_of_this_host_id_from_another_machine_is_refused_not_adopted(
    two: Hosts,
) -> None:
    a = two.workdir("a")
    code, _, err = pulse(a, env={"LOOOP_MACHINE_ID": "machine-one"})
    assert code == 0, err
    held = token(a)
    assert held
    clone = two.workdir("a2")  # a cloned VM: the same host id, another machine
    (clone.state / "host-id").write_text("a\n")
    code, _, err = pulse(clone, env={"LOOOP_MACHINE_ID": "machine-two"})
    assert code == 2, err
    assert "on another machine (machine-one" in err and "this one is machine-two" in err, err
    assert token(a) == held  # nothing taken over, nothing renewed by the clone


def test_a_second_work_dir_of_one_host_steps_aside(two: Hosts) -> None:
    a = two.workdir("a")
    assert pulse(a)[0] == 0
    other = two.workdir("a-copy")  # the same host id and machine, another checkout
    (other.state / "host-id").write_text("a\n")
    code, out, err = pulse(other)
    assert code == 0, err
    assert out["outcome"] == "locked" and out["held_by"]["host"] == "a", out
    assert not (other.root / "state" / "last-world.json").exists()  # it beat nothing


def test_other_hosts_pulses_are_one_read_and_say_who_holds_it_since_when(
    two: Hosts, etcd: Cluster
) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    holder = choose.coordinator(open_wd(a))
    with holder.pulse() as held:  # host a beats (here, in this process) and keeps the pulse
        pass
    before = grpc_calls(etcd)  # between a's beats this process asks etcd nothing
    code, out, err = pulse(b)
    after = grpc_calls(etcd)
    holder.keep_pulse(True)  # from now on, as `looop up` would: a keeps it between beats
    assert code == 0, err
    assert out["outcome"] == "locked", out
    assert out["held_by"]["host"] == "a" and out["held_by"]["token"] == held, out
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT.*", out["held_by"]["since"]), out
    assert out["reason"].startswith(f"the pulse is held by host a since {out['held_by']['since']}")
    spent = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert spent.get("Range") == 1, spent  # the pulse key, once
    for method in ("Txn", "Put", "DeleteRange", "LeaseGrant", "LeaseRevoke", "LeaseKeepAlive"):
        assert spent.get(method, 0) == 0, (method, spent)  # no lock, no lease, no write
    plain = run_looop("-C", str(b.root), "pulse")  # not a terminal: quiet, as cron likes it
    assert plain.returncode == 0 and plain.stdout == "" and plain.stderr == "", plain
    status = run_looop("-C", str(b.root), "status")
    assert f"the shared pulse is held by a since {out['held_by']['since']}" in status.stdout
    assert json.loads(run_looop("-C", str(b.root), "status", "--json").stdout)["coordination"][
        "pulse"
    ] == {"host": "a", "epoch": held, "since": out["held_by"]["since"]}


def test_the_holders_death_hands_the_pulse_over_within_the_ttl_and_a_beat(quick: Hosts) -> None:
    a, b = quick.workdir("a"), quick.workdir("b")
    up = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(a.root), "up", "--interval", "1"],
        env={k: v for k, v in os.environ.items() if k != "LOOOP_DIR"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: token(a), 30, "host a's `looop up` to take the pulse")
        held = token(a)
        # `looop up` keeps it between beats: well past the TTL, b still steps aside.
        deadline = time.monotonic() + 3 * SHORT_TTL
        while time.monotonic() < deadline:
            code, out, err = pulse(b)
            assert code == 0 and out["outcome"] == "locked", (out, err)
        assert token(a) == held
        os.kill(up.pid, signal.SIGKILL)  # the holder dies; nobody resigns for it
        killed = time.monotonic()
        up.wait(10)

        def b_took_it() -> bool:
            return pulse(b)[1].get("outcome") != "locked"

        wait_for(b_took_it, 30, "host b to take the pulse over", interval=0)
        failover = time.monotonic() - killed
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(10)
    assert token(b) not in (None, held)
    # The lease lapses after the TTL; b's next beat takes it (a beat here is a whole
    # `looop pulse` process, a second or so on a busy machine).
    assert failover < SHORT_TTL + 10, failover


def test_looop_down_hands_the_pulse_over_at_once(two: Hosts) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    assert pulse(a)[0] == 0
    held = token(a)
    assert pulse(b)[1]["outcome"] == "locked"
    down = run_looop("-C", str(a.root), "down", "--json")
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["resigned"]["token"] == held
    code, out, err = pulse(b)  # at once: no lease to wait out
    assert code == 0 and out["outcome"] != "locked", (out, err)
    assert token(b) not in (None, held)
    again = run_looop("-C", str(a.root), "down", "--json")  # not a's to hand over now
    assert json.loads(again.stdout)["resigned"] is None
    assert token(b) not in (None, held)


def test_the_holder_keeps_its_token_beat_after_beat(two: Hosts) -> None:
    a, b = two.workdir("a"), two.workdir("b")
    tokens = []
    for _ in range(3):
        code, out, err = pulse(a, "--force")
        assert code == 0 and out["outcome"] == "decided", (out, err)
        tokens.append(token(a))
        assert pulse(b)[1]["outcome"] == "locked"
    assert tokens[0] and tokens == [tokens[0]] * 3  # one epoch, not one per beat
    committed = json.loads(choose.coordinator(open_wd(a)).read_world() or b"{}")
    assert committed["epoch"] == tokens[0] and committed["host"] == "a"
