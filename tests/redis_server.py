"""A real redis-server on a free loopback port, for the tests that need Redis."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.live_server import free_port


class RedisServer:
    """One redis-server process; ``stop`` and ``start`` again on the same port."""

    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = Path(tempfile.mkdtemp(prefix="hookgate-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not _listening(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("redis-server did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None


@contextmanager
def running_redis() -> Iterator[RedisServer]:
    """A started redis-server; skipped (failed on CI) when there is none to start."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but redis-server is missing: .ci/run must install it")
        pytest.skip("Redis tests skipped: no redis-server binary on this machine "
                    "(apt-get install redis-server to run them)")
    pytest.importorskip("redis", reason="Redis tests skipped: pip install 'hookgate[redis]'")
    server = RedisServer(binary)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0
