"""Coordination tests end the lease keepers they caused.

A claim on etcd starts a keeper (coord/keeper.py) that keeps its holder's lease while the
holder lives, and a claim a test takes in-process is held by the test's own process, which
lives to the end of the session: so each keeper would poll etcd until the session's etcd
stops. `LOOOP_TEST_LEAKS=1` (tests/conftest.py) named ten such tests."""

from __future__ import annotations

from collections.abc import Iterator

import psutil
import pytest

from tests import leftovers


@pytest.fixture(autouse=True)
def _end_lease_keepers(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    base = request.node.funcargs.get("tmp_path")
    if base is None:
        return
    keepers = []
    for proc in leftovers.leftovers(base):
        try:
            if "looop_py.coord.keeper" in " ".join(proc.cmdline()):
                proc.kill()
                keepers.append(proc)
        except psutil.Error:  # it ended meanwhile (its holder went, or etcd did)
            continue
    psutil.wait_procs(keepers, timeout=5)
