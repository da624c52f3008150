"""etcd beyond the contract: a 3-member cluster losing its leader, quorum loss, the CLI with
its lease keepers, the `[coordination]` checks, and a files work dir never loading the etcd
client."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py import jsonio
from looop_py.beat.pulse import beat
from looop_py.beat.result import BeatOutcome
from looop_py.coord import choose, holders
from looop_py.errors import ClaimHeld, ConfigError
from looop_py.workdir import config as config_mod
from looop_py.workdir import journal
from looop_py.workdir.paths import Paths
from tests.cli.test_process import _loaded_after_plain_pulse
from tests.conftest import close_opened, open_wd, run_looop, wait_for, write_sensor
from tests.coord.test_contract import TTL, Noop
from tests.etcdserver import Cluster, use_etcd


def _shm() -> Path:
    return Path(
        tempfile.mkdtemp(
            prefix="looop-etcd-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
        )
    )


@pytest.fixture
def cluster3() -> Iterator[Cluster]:
    root = _shm()
    cluster = Cluster(root, size=3).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        close_opened()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def single() -> Iterator[Cluster]:
    root = _shm()
    cluster = Cluster(root).start()
    try:
        yield cluster
    finally:
        cluster.stop()
        close_opened()
        shutil.rmtree(root, ignore_errors=True)


def _on(wd: Paths, cluster: Cluster) -> Paths:
    use_etcd(wd.config, cluster.endpoints, f"/looop/t-{uuid.uuid4().hex[:8]}", TTL)
    return wd


@pytest.mark.etcd
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_claims_and_tokens_survive_a_leader_kill(cluster3: Cluster, wd: Paths) -> None:
    coord = choose.coordinator(open_wd(_on(wd, cluster3)))
    me, other = holders.own_holder("me"), holders.own_holder("other")
    held = coord.claim("repo", me, now=time.time()).claim.epoch
    for _ in range(3):
        last_ci = coord.claim("ci", other, now=time.time()).claim.epoch
        coord.unclaim("ci", other, now=time.time())
    assert coord.fenced_put("repo", held, "repo/state", b"before")
    leader = cluster3.leader()
    cluster3.kill(leader)
    killed = time.monotonic()
    # Requests fail over to the two members left, which elect a new leader.
    wait_for(lambda: _answers(coord), timeout=30, what="the cluster after the leader kill")
    recovered = time.monotonic() - killed
    time.sleep(3 * TTL)  # well past the TTL: the lease was kept alive through the election
    view = coord.get("repo", time.time())
    assert view is not None and view.live and view.claim is not None
    assert view.claim.epoch == held and view.claim.session == "me"
    with pytest.raises(ClaimHeld):
        coord.claim("repo", other, now=time.time())
    assert coord.fenced_put("repo", held, "repo/state", b"after")
    assert coord.read("repo/state") == b"after"
    now_ci = coord.claim("ci", other, now=time.time()).claim.epoch
    assert now_ci > last_ci  # etcd's revisions survived the election: tokens never go back
    assert not coord.fenced_put("ci", last_ci, "ci/state", b"stale")
    print(f"leader m{leader} killed: requests answered again after {recovered:.2f} s")


def _answers(coord: choose.Coordinator) -> bool:
    from looop_py.errors import Unavailable

    try:
        coord.list_claims(time.time())
        return True
    except Unavailable:
        return False


@pytest.mark.etcd
def test_lost_quorum_skips_the_beat_and_never_falls_back(single: Cluster, wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    _on(wd, single)
    assert beat(open_wd(wd), force=True, decider=Noop()).outcome is BeatOutcome.DECIDED
    committed = jsonio.read_json(wd.last_world)
    assert committed["host"] and committed["epoch"] > 0  # the pulse token it committed under
    single.stop()
    result = beat(open_wd(wd), force=True, decider=Noop())
    assert result.outcome is BeatOutcome.SKIPPED
    assert result.reason and "coordination unavailable" in result.reason
    assert "coordination unavailable, beat skipped" in wd.journal.read_text()
    events = [e for e in journal.recent_events(wd) if e["event"] == "beat"]
    assert events[-1]["outcome"] == "skipped" and "etcd" in events[-1]["reason"]
    refused = run_looop("-C", str(wd.root), "claim", "repo")
    assert refused.returncode == 3 and "etcd cannot be reached" in refused.stderr
    assert not list(wd.claims.glob("*.json"))  # nothing was taken on files instead


@pytest.mark.etcd
def test_a_second_host_continues_from_the_shared_committed_world(
    single: Cluster, tmp_path: Path
) -> None:
    from looop_py.workdir.template import init

    prefix = f"/looop/t-{uuid.uuid4().hex[:8]}"
    dirs = []
    for i in (0, 1):
        root = init(tmp_path / f"wd{i}").root
        for script in (root / "sensors").glob("*.sh"):
            script.unlink()
        (root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
        use_etcd(root / "looop.toml", single.endpoints, prefix, TTL)
        write_sensor(Paths(root), "s", "echo same")
        dirs.append(Paths(root))
    first = beat(open_wd(dirs[0]), decider=Noop())
    assert first.outcome is BeatOutcome.DECIDED
    # The other host sees the same world already committed: nothing new, no decide.
    choose.coordinator(open_wd(dirs[0])).resign()  # host 0 hands over (its pulse sticks)
    second = beat(open_wd(dirs[1]), decider=Noop())
    assert second.outcome is BeatOutcome.SKIPPED and second.prev_hash == first.world_hash
    # No quiet seal on etcd: the next beat takes the pulse and reads the shared world again.
    from looop_py.sensing import seal

    assert not any((d.root / seal.SEAL).exists() for d in dirs)
    choose.coordinator(open_wd(dirs[1])).resign()
    assert beat(open_wd(dirs[0]), decider=Noop()).prev_hash == first.world_hash


@pytest.mark.etcd
@pytest.mark.timeout(90)
def test_cli_claims_on_etcd_follow_the_script_through_its_keeper(
    single: Cluster, wd: Paths
) -> None:
    _on(wd, single)
    env = {k: v for k, v in os.environ.items() if k != "LOOOP_SESSION_ID"}
    script = (
        f'epoch=$({sessions_bin()} -C "{wd.root}" claim repo) || exit 9\n'
        f'echo "$epoch" > "{wd.root}/epoch"\nsleep 60\n'
    )
    holder = subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True)
    try:
        epoch_file = wd.root / "epoch"
        wait_for(lambda: epoch_file.exists() and epoch_file.read_text().strip(), what="claim")
        first = int(epoch_file.read_text().strip())
        assert first > 0
        time.sleep(TTL * 2)  # its keeper keeps the lease alive although `looop claim` is gone
        refused = run_looop("-C", str(wd.root), "claim", "repo")
        assert refused.returncode == 4 and f"pid {holder.pid}" in refused.stderr
        listed = jsonio.loads(run_looop("-C", str(wd.root), "claims", "--json").stdout)
        (row,) = listed["claims"]
        assert (row["name"], row["live"], row["pid"], row["epoch"]) == (
            "repo",
            True,
            holder.pid,
            first,
        )
        assert row["host"]
        text = run_looop("-C", str(wd.root), "claims").stdout
        assert "HOST" in text and row["host"] in text
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    killed = time.monotonic()
    # The keeper sees its holder die and revokes the lease: gone well before the TTL.
    wait_for(
        lambda: (
            not jsonio.loads(run_looop("-C", str(wd.root), "claims", "--json").stdout)["claims"]
        ),
        timeout=TTL + 5,
        what="the claim to go",
    )
    print(f"keeper: script killed -> claim gone in {time.monotonic() - killed:.2f} s")
    again = run_looop("-C", str(wd.root), "claim", "repo", "--json")
    assert again.returncode == 0 and jsonio.loads(again.stdout)["epoch"] > first
    assert run_looop("-C", str(wd.root), "unclaim", "repo").returncode == 0
    assert jsonio.loads(run_looop("-C", str(wd.root), "claims", "--json").stdout)["claims"] == []


def sessions_bin() -> str:
    from looop_py.workdir.environ import looop_bin

    return looop_bin()


def test_a_quiet_beat_and_a_claim_on_files_never_load_the_etcd_client(wd: Paths) -> None:
    write_sensor(wd, "s", "echo 1")
    heavy = ("looop_py.coord.wire", "looop_py.coord.etcd", "looop_py.coord.remote")
    for args in (["pulse"], ["pulse", "--force"], ["claim", "x"], ["unclaim", "x"]):
        out = _loaded_after_plain_pulse(wd, args, heavy)
        assert "HEAVY []" in out, (args, out)


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ('backend = "zookeeper"', "coordination.backend: unknown backend 'zookeeper'"),
        ('backend = "etcd"', "coordination.prefix: '' is not a key prefix"),
        ('backend = "etcd"\nprefix = "looop"', "coordination.prefix: 'looop' is not a key prefix"),
        ('backend = "etcd"\nprefix = "/a"\nendpoints = []', "needs at least one endpoint"),
        ('backend = "etcd"\nprefix = "/a"\nendpoints = ["127.0.0.1:2379"]', "not an etcd client"),
        (
            'backend = "etcd"\nprefix = "/a"\nendpoints = ["http://a:1", "https://b:2"]',
            "mixes http and https",
        ),
        ('backend = "etcd"\nprefix = "/a"\nca_cert = "/ca.pem"', "TLS options need https://"),
        (
            'backend = "etcd"\nprefix = "/a"\nendpoints = ["https://a:1"]\ncert_cert = "/c.pem"',
            "needs both cert_cert and cert_key",
        ),
        ('backend = "etcd"\nprefix = "/a"\nusername = "me"', "needs both username and password_"),
        (
            'backend = "etcd"\nprefix = "/a"\nusername = "me"\npassword_env = "hunter 2"',
            "is not a variable name",
        ),
        ("lease_ttl_s = 1", "coordination.lease_ttl_s: must be at least 2"),
        ("timeout_s = 0", "coordination.timeout_s: must be more than 0"),
        ('host_id = "a b"', "coordination.host_id: 'a b' is not a host name"),
        (  # a shared looop.toml would give every host the one id
            'backend = "etcd"\nprefix = "/a"\nendpoints = ["http://a:1"]\nhost_id = "pulse-1"',
            "would name every host that shares this file alike",
        ),
        ('endpoint = "x"', "unknown key coordination.endpoint"),
    ],
)
def test_coordination_keys_are_checked(wd: Paths, table: str, needle: str) -> None:
    wd.config.write_text(f"[coordination]\n{table}\n")
    with pytest.raises(ConfigError) as info:
        config_mod.load(wd.config)
    assert needle in str(info.value)
    done = run_looop("-C", str(wd.root), "claims")
    assert done.returncode == 2 and "looop.toml: " in done.stderr and needle in done.stderr


def test_a_good_etcd_table_loads(wd: Paths) -> None:
    wd.config.write_text(
        '[coordination]\nbackend = "etcd"\nprefix = "/looop/team-a"\n'
        'endpoints = ["https://etcd-1:2379", "https://[::1]:2379"]\nca_cert = "/ca.pem"\n'
        'cert_cert = "/c.pem"\ncert_key = "/k.pem"\nusername = "looop"\n'
        'password_env = "ETCD_PASSWORD"\nlease_ttl_s = 15\n'
    )
    c = config_mod.load(wd.config).coordination
    assert (c.backend, c.prefix, c.lease_ttl_s, c.host_id) == ("etcd", "/looop/team-a", 15.0, "")


@pytest.mark.etcd
def test_the_decider_sees_the_claims_every_host_holds_on_etcd(single: Cluster, wd: Paths) -> None:
    _on(wd, single)
    coord = choose.coordinator(open_wd(wd))
    coord.claim("repo", holders.own_holder("s-other-host"), now=time.time())
    assert beat(open_wd(wd), decider=Noop()).outcome is BeatOutcome.DECIDED
    snap = jsonio.read_json(wd.snapshot("sys-claims"))
    assert snap["signal"] == [{"name": "repo", "session": "s-other-host"}]  # not `pulse`
    assert snap["detail"]["claims"]["repo"]["epoch"] >= 1
    assert not list(wd.claims.glob("*.json"))  # nothing of it on files
