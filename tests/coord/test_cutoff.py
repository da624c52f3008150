"""A host cut off from etcd is loud: its pulse exits 3 with one line on stderr (the reason,
and since when), `looop status` shows its local mirror marked stale and exits 3
("degraded"), and the first beat that gets through again clears the mark."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py.coord.etcd import put
from tests.conftest import close_opened, open_wd, run_looop
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.coord.test_shared_records import Hosts
from tests.etcdserver import Cluster, free_port


@pytest.fixture
def two(etcd: Cluster, tmp_path: Path) -> Iterator[Hosts]:
    yield Hosts("etcd", tmp_path, etcd)
    close_opened()


@pytest.mark.etcd
def test_a_cut_off_pulse_exits_3_saying_why_and_since_when(two: Hosts) -> None:
    a = two.workdir("a")
    assert run_looop("-C", str(a.root), "pulse", "--force").returncode == 0  # a mirror exists
    good = a.config.read_text()
    assert two.cluster is not None
    nowhere = good.replace(two.cluster.endpoints[0], f"http://127.0.0.1:{free_port()}")
    assert nowhere != good
    a.config.write_text(nowhere)  # the same loop, its etcd out of reach
    first = run_looop("-C", str(a.root), "pulse")
    assert first.returncode == 3, (first.stdout, first.stderr)
    [line] = first.stderr.splitlines()  # one line, for cron's mail
    assert "beat skipped: etcd cannot be reached" in line and "(since " in line, line
    since = line.rpartition("(since ")[2]
    again = run_looop("-C", str(a.root), "pulse", "--quiet")  # --quiet does not hush it
    assert again.returncode == 3 and again.stderr.strip().rpartition("(since ")[2] == since
    as_json = run_looop("-C", str(a.root), "pulse", "--json")
    assert as_json.returncode == 3 and "since" in json.loads(as_json.stdout)["cut_off"]

    status = run_looop("-C", str(a.root), "status")
    assert status.returncode == 3, status.stderr
    said = status.stdout + status.stderr  # the warnings are notes, on stderr
    assert "degraded" in said and "local mirror, stale" in said, said
    assert "world hash  " in status.stdout and "none committed yet" not in status.stdout
    view = json.loads(run_looop("-C", str(a.root), "status", "--json").stdout)
    assert view["degraded"]["mirror_age_s"] >= 0 and view["degraded"]["since"] is not None

    a.config.write_text(good)  # etcd answers again: the mark goes with the next beat
    assert run_looop("-C", str(a.root), "pulse").returncode == 0
    back = run_looop("-C", str(a.root), "status", "--json")
    assert back.returncode == 0 and json.loads(back.stdout)["degraded"] is None


@pytest.mark.etcd
def test_doctor_names_which_endpoints_answer(two: Hosts) -> None:
    a = two.workdir("a")
    assert two.cluster is not None
    live = two.cluster.endpoints[0]
    dead = f"http://127.0.0.1:{free_port()}"
    text = a.config.read_text()
    a.config.write_text(
        text.replace(f'endpoints = ["{live}"]', f'endpoints = ["{live}", "{dead}"]')
    )
    r = run_looop("-C", str(a.root), "doctor", "--offline", "--json", timeout=60)
    (check,) = [c for c in json.loads(r.stdout)["checks"] if c["name"] == "coordination"]
    assert check["verdict"] == "warn", check
    assert f"{live} answers" in check["message"] and f"{dead} does not answer" in check["message"]
    assert dead in check["fix"]


@pytest.mark.etcd
def test_compaction_is_seen_and_tokens_survive_it(two: Hosts) -> None:
    from looop_py.coord import choose, holders

    a = two.workdir("a")
    coord = choose.coordinator(open_wd(a))
    me = holders.own_holder("me")
    held = coord.claim("repo", me, now=time.time()).claim.epoch
    client = coord.client  # type: ignore[attr-defined]
    assert client.never_compacted(coord.key("claims", ""))  # type: ignore[attr-defined]
    for i in range(3):
        client.txn([], [put(coord.key("data", "noise"), str(i).encode())])  # type: ignore[attr-defined]
    _, revision = client.txn_revision([], [])
    client.post("/kv/compaction", {"revision": revision, "physical": True})
    assert not client.never_compacted(coord.key("claims", ""))  # type: ignore[attr-defined]
    view = coord.get("repo", time.time())
    assert view is not None and view.claim is not None and view.claim.epoch == held
    assert coord.fenced_put("repo", held, "repo/state", b"after compaction")
