"""A real `looop serve` process on a free port, for the tests that need the process."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from looop_py.web import security
from looop_py.workdir.paths import Paths
from tests.conftest import wait_for


@dataclass(frozen=True)
class Served:
    url: str  # the login URL it printed (a one-time code)
    base: str  # http://127.0.0.1:PORT
    port: int
    token: str  # from state/web-token-PORT, as a script on this machine reads it
    out: str  # everything it printed before serving


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(wd: Paths, *args: str) -> tuple[subprocess.Popen[str], Served]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "looop_py", "-C", str(wd.root), "serve", "--port", str(port), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url, out = "", ""
    assert proc.stdout is not None
    for line in proc.stdout:
        out += line
        if m := re.search(r"open (http://\S+)", line):
            url = m.group(1)
        if "another browser" in line:
            break
    assert url, proc.stderr.read() if proc.stderr else ""

    def up() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(up, 15, "the server")
    token = security.token_path(wd, port).read_text().strip()
    return proc, Served(url, url.split("/?", 1)[0], port, token, out)


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def served(wd: Paths) -> Iterator[Served]:
    proc, got = start(wd)
    try:
        yield got
    finally:
        stop(proc)
