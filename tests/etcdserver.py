"""Real etcd for tests: Debian's `etcd` on free loopback ports in a temp dir, stopped by PID.

`need()` skips a test of the etcd tier with the reason when etcd is missing,
unless CI=true, where that is a failure (.ci/run installs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.conftest import wait_for

ETCD = shutil.which("etcd") or ("/usr/bin/etcd" if os.path.exists("/usr/bin/etcd") else None)


def need() -> str:
    if ETCD is None:
        why = "etcd is not installed (.ci/run installs Debian's etcd-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    assert ETCD is not None
    return ETCD


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """N etcd members on loopback; `endpoints` are their client URLs."""

    def __init__(self, root: Path, size: int = 1) -> None:
        self.root = root
        self.names = [f"m{i}" for i in range(size)]
        self.client = [free_port() for _ in self.names]
        self.peer = [free_port() for _ in self.names]
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.endpoints = [f"http://127.0.0.1:{p}" for p in self.client]

    def start(self) -> Cluster:
        etcd = need()
        initial = ",".join(
            f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer, strict=True)
        )
        token = uuid.uuid4().hex[:12]
        for i, name in enumerate(self.names):
            data = self.root / name
            data.mkdir(parents=True, exist_ok=True)
            log = (self.root / f"{name}.log").open("wb")
            self.procs[name] = subprocess.Popen(
                [
                    etcd,
                    "--name", name,
                    "--data-dir", str(data),
                    "--listen-client-urls", self.endpoints[i],
                    "--advertise-client-urls", self.endpoints[i],
                    "--listen-peer-urls", f"http://127.0.0.1:{self.peer[i]}",
                    "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer[i]}",
                    "--initial-cluster", initial,
                    "--initial-cluster-state", "new",
                    "--initial-cluster-token", token,
                    "--logger", "zap",
                    "--log-level", "error",
                ],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )  # fmt: skip

        def healthy() -> bool:
            if all(self.healthy(i) for i in range(len(self.names))):
                return True
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"etcd {name} exited: {self.log(name)[-2000:]}")
            return False

        wait_for(healthy, 30, "etcd to become healthy", interval=0.05)
        return self

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def _get(self, i: int, path: str, body: dict[str, object] | None = None) -> dict[str, object]:
        url = self.endpoints[i] + path
        data = None if body is None else json.dumps(body).encode()
        with urllib.request.urlopen(url, data=data, timeout=2) as r:
            found: dict[str, object] = json.loads(r.read())
            return found

    def healthy(self, i: int) -> bool:
        try:
            return self._get(i, "/health").get("health") == "true"
        except (OSError, ValueError):
            return False

    def leader(self) -> int:
        """The index of the current leader (asked of any live member)."""
        for i, name in enumerate(self.names):
            if name not in self.procs:
                continue
            with contextlib.suppress(OSError, ValueError, KeyError):
                status = self._get(i, "/v3/maintenance/status", {})
                leader = str(status["leader"])
                for j in range(len(self.names)):
                    if self.names[j] not in self.procs:
                        continue
                    me = self._get(j, "/v3/maintenance/status", {})
                    if str(me["header"]["member_id"]) == leader:  # type: ignore[index]
                        return j
        raise RuntimeError("no leader")

    def kill(self, i: int) -> None:
        proc = self.procs.pop(self.names[i])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        self.procs.clear()


def use_etcd(config: Path, endpoints: list[str], prefix: str, ttl: float = 2) -> None:
    """Point a work dir's looop.toml at etcd: keys under `prefix`, leases of `ttl` s."""
    urls = ", ".join(f'"{e}"' for e in endpoints)
    keys = (
        f'backend = "etcd"\nendpoints = [{urls}]\nprefix = "{prefix}"\n'
        f"lease_ttl_s = {ttl}\ntimeout_s = 2\n"
    )
    text = config.read_text()
    if "\n[coordination]\n" in text:
        text = text.replace("\n[coordination]\n", f"\n[coordination]\n{keys}", 1)
    else:
        text += f"\n[coordination]\n{keys}"
    config.write_text(text)
