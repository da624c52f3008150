"""Which coordination backend a work dir uses: `[coordination] backend` in looop.toml.

Every door opens its work dir here, once: `open_workdir` loads looop.toml and
opens the shelf the backend names. `files` needs nothing beyond the base install;
`etcd` loads coord/remote.py (and with it the etcd client, coord/etcd.py) only
here, only when configured, so a beat on files never pays for it. The etcd shelf holds the one
coordinator of its WorkDir: this process's lease and the thread that keeps it
alive, let go by `WorkDir.close`.
"""

from __future__ import annotations

import _thread
import time
from typing import TYPE_CHECKING

from looop_py import jsonio
from looop_py.coord.base import host_id
from looop_py.workdir import config as config_mod
from looop_py.workdir.context import Clock, WorkDir
from looop_py.workdir.paths import Paths
from looop_py.workdir.shelf import FilesShelf

if TYPE_CHECKING:
    from looop_py.coord.base import Coordinator
    from looop_py.workdir.shelf import Shelf


def open_workdir(
    paths: Paths,
    *,
    clock: Clock = time.time,
    config: config_mod.Config | None = None,
    write_cache: bool = True,
) -> WorkDir:
    """The work dir at `paths`: looop.toml loaded (unless given) and its shelf opened.

    `write_cache=False` leaves state/ as it was (`looop sense` writes nothing there)."""
    if config is None:
        config = config_mod.load(paths.config, paths.config_cache, write_cache=write_cache)
    return WorkDir(paths, config, open_shelf(paths, config), clock)


def open_shelf(paths: Paths, cfg: config_mod.Config) -> Shelf:
    """The shelf `cfg` names: local files, or etcd (never quietly files for what is shared)."""
    if cfg.coordination.backend == "files":
        return FilesShelf(paths)
    # The etcd shelf, its coordinator and client: only when looop.toml says etcd.
    from looop_py.coord.etcdshelf import EtcdShelf
    from looop_py.coord.remote import EtcdCoordinator

    c = cfg.coordination
    return EtcdShelf(EtcdCoordinator(paths, c, host_id(c.host_id, paths.state)))


def coordinator(wd: WorkDir) -> Coordinator:
    """The work dir's claims backend: claims/ on this machine, or the etcd shelf's own."""
    if wd.shelf.backend == "files":
        from looop_py.coord.files import FilesCoordinator  # only when claims are asked about

        return FilesCoordinator(wd.paths, host_id(wd.config.coordination.host_id, wd.paths.state))
    from looop_py.coord.etcdshelf import EtcdShelf  # loaded already: the shelf is one

    assert isinstance(wd.shelf, EtcdShelf)  # the only shared backend
    return wd.shelf.coord


class Reopening:
    """A long-lived door's work dir (`looop serve`, `looop up`): the same WorkDir while
    looop.toml stays as it was, a fresh one (config loaded, shelf opened) after an edit,
    so a running process follows the config as a new command would."""

    def __init__(self, paths: Paths, *, clock: Clock = time.time) -> None:
        self.paths = paths
        self.clock = clock
        self._stamp: tuple[int, int, int, int] | None = None
        self._wd: WorkDir | None = None
        # the page's requests run in a thread pool; _thread's lock is threading.Lock, without
        # importing threading (a full beat's fixed cost)
        self._lock = _thread.allocate_lock()

    def current(self) -> WorkDir:
        stamp = jsonio.file_stamp(self.paths.config)
        with self._lock:
            if self._wd is None or stamp != self._stamp:
                fresh = open_workdir(self.paths, clock=self.clock)  # raises on a bad edit
                self.close()
                self._wd, self._stamp = fresh, stamp
            return self._wd

    def close(self) -> None:
        if self._wd is not None:
            self._wd.close()
            self._wd = None
