"""Loops apart on one etcd: a prefix nested with another loop's is refused, naming both
(coord/prefixes.py). Rainy first: inside another's, containing another's; then siblings
that only share leading characters are two loops, as they should be.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from looop_py.coord import choose
from looop_py.coord.base import PULSE
from looop_py.coord.prefixes import nested
from looop_py.workdir.paths import Paths
from looop_py.workdir.template import init
from tests.conftest import close_opened, open_wd, run_looop
from tests.coord.test_contract import TTL
from tests.coord.test_contract import etcd as etcd  # noqa: PLC0414 - the module's cluster
from tests.etcdserver import Cluster, use_etcd


@pytest.fixture
def loops(etcd: Cluster, tmp_path: Path) -> Iterator[tuple[Cluster, Path, str]]:
    yield etcd, tmp_path, f"/looop/nest-{uuid.uuid4().hex[:8]}"
    close_opened()


def loop(where: tuple[Cluster, Path, str], name: str, prefix: str) -> Paths:
    cluster, tmp, _ = where
    root = init(tmp / name).root
    for script in (root / "sensors").glob("*.sh"):
        script.unlink()
    (root / "looop.toml").write_text('[decider]\nbackend = "noop"\n')
    use_etcd(root / "looop.toml", cluster.endpoints, prefix, TTL)
    return Paths(root)


def test_nested_is_by_whole_segments() -> None:
    assert nested("/p", "/p/claims") and nested("/p/claims", "/p")
    assert not nested("/p", "/p") and not nested("/p/a", "/p/ab") and not nested("/a", "/b")


@pytest.mark.etcd
@pytest.mark.parametrize("second", ["inside", "around"])
def test_a_prefix_nested_with_another_loops_is_refused_naming_both(
    loops: tuple[Cluster, Path, str], second: str
) -> None:
    base = loops[2]
    first_prefix, other_prefix = (
        (base, f"{base}/claims") if second == "inside" else (f"{base}/inner", base)
    )
    first = loop(loops, "first", first_prefix)
    assert run_looop("-C", str(first.root), "pulse").returncode == 0
    other = loop(loops, "other", other_prefix)
    for args in (("pulse",), ("claim", "repo")):
        r = run_looop("-C", str(other.root), *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        said = r.stderr
        assert f"{other_prefix!r} is nested with the prefix {first_prefix!r}" in said, said
        assert str(first.root) in said  # naming the other loop's work dir
    # The refused loop took nothing: no pulse, no claim, and no record to refuse others by.
    coord = choose.coordinator(open_wd(other))
    assert coord.get(PULSE, 0) is None and coord.get("repo", 0) is None
    again = run_looop("-C", str(first.root), "pulse", "--force")  # the first carries on
    assert again.returncode == 0, again.stderr


@pytest.mark.etcd
def test_sibling_prefixes_that_share_leading_characters_are_two_loops(
    loops: tuple[Cluster, Path, str],
) -> None:
    base = loops[2]
    for name, prefix in (("a", f"{base}/a"), ("ab", f"{base}/ab")):
        r = run_looop("-C", str(loop(loops, name, prefix).root), "pulse")
        assert r.returncode == 0, r.stderr
