"""Which coordination backend a work dir uses: `[coordination] backend` in looop.toml.

`files` needs nothing beyond the base install; `etcd` loads coord/remote.py (and
with it etcd3gw) only here, only when configured, so a quiet beat on files never pays
for it. One etcd backend per process and configuration is kept: it holds this
process's lease and the thread that keeps it alive.
"""

from __future__ import annotations

import os

from looop_py.coord.base import host_id
from looop_py.coord.files import FilesCoordinator
from looop_py.errors import ConfigError
from looop_py.workdir import config as config_mod
from looop_py.workdir import shelf
from looop_py.workdir.paths import Paths

# typing is not imported at run time: `looop claim` is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from looop_py.coord.base import Coordinator

_shared: dict[tuple[str, object, str], Coordinator] = {}
os.register_at_fork(after_in_child=_shared.clear)  # a child keeps no lease of its parent's


def coordinator(paths: Paths, cfg: config_mod.Config | None = None) -> Coordinator:
    if cfg is None:
        cfg = config_mod.load(paths.config, paths.config_cache)
    c = cfg.coordination
    host = host_id(c.host_id)
    if c.backend == "files":
        return FilesCoordinator(paths, host)
    key = (str(paths.root), c, host)
    if key not in _shared:
        try:
            from looop_py.coord.remote import EtcdCoordinator  # etcd3gw, only when configured
        except ImportError as exc:
            raise ConfigError(
                f"{paths.config}: coordination.backend: etcd needs etcd3gw ({exc})",
                "pip install 'looop-py[etcd]'",
            ) from None
        _shared[key] = EtcdCoordinator(paths, c, host)
    return _shared[key]


def forget() -> None:
    """Close every shared backend (their leases are revoked): tests and long-lived callers."""
    for found in _shared.values():
        found.close()
    _shared.clear()
    shelf.forget()
