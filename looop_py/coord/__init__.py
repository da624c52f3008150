"""Coordination: claims, fencing, the pulse and the shared records, on files or on etcd.

Importing this package registers the etcd shelf with workdir/shelf.py (which, a
layer below, cannot import it); the backend itself loads only when a work dir's
looop.toml names it.
"""

from __future__ import annotations

from looop_py.workdir import shelf as _shelf

# typing is not imported at run time: `looop claim` is bound by start-up cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from looop_py.workdir.config import Config
    from looop_py.workdir.paths import Paths
    from looop_py.workdir.shelf import Shelf


def _etcd_shelf(paths: Paths, cfg: Config) -> Shelf:
    from looop_py.coord.choose import coordinator  # only when a work dir is on etcd

    coord = coordinator(paths, cfg)  # first: it says what to install when etcd3gw is absent
    from looop_py.coord.etcdshelf import EtcdShelf  # etcd3gw, as above
    from looop_py.coord.remote import EtcdCoordinator

    assert isinstance(coord, EtcdCoordinator)  # backend = "etcd" chose it
    return EtcdShelf(coord)


_shelf.register("etcd", _etcd_shelf)
