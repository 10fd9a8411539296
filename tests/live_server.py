"""A real hookgate server on 127.0.0.1 for tests: uvicorn in a thread with its own loop."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from hookgate.app import create_app
from hookgate.runtime.deployment import Deployment
from hookgate.runtime.runtime import Runtime
from hookgate.server.serving import listen, uvicorn_config


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    def __init__(self, runtime: Runtime, server: uvicorn.Server, thread: threading.Thread,
                 port: int) -> None:
        self.runtime = runtime
        self.server = server
        self.thread = thread
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def call(self, coro: Any, timeout: float = 30) -> Any:
        """Run a coroutine on the server's loop (e.g. to inspect its runtime)."""
        loop = self.server_loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    @property
    def server_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop  # type: ignore[no-any-return]


@contextmanager
def live_server(deployment: Deployment, *, keepalive_s: float = 0.5,
                sweep_interval: float = 0.2, max_body: int | None = None,
                access_recheck_s: float | None = None,
                websockets: bool | None = None, port: int | None = None
                ) -> Iterator[LiveServer]:
    runtime = Runtime(deployment, sweep_interval=sweep_interval)
    kwargs: dict[str, Any] = {"keepalive_s": keepalive_s, "access_recheck_s": access_recheck_s}
    if max_body is not None:
        kwargs["max_body"] = max_body
    app = create_app(runtime, **kwargs)
    # Bound here and handed to uvicorn, never closed in between: a port picked free and bound
    # again by uvicorn could be taken meanwhile by another worker's server ("address already
    # in use", the server never starts).
    sock = listen("127.0.0.1", 0 if port is None else port)
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", port, graceful_s=2,
                                           websockets=bool(deployment.mcp_servers)
                                           if websockets is None else websockets))
    holder: dict[str, asyncio.AbstractEventLoop] = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        holder["loop"] = loop
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.serve(sockets=[sock]))
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        live = LiveServer(runtime, server, thread, port)
        live._loop = holder["loop"]  # type: ignore[attr-defined]
        yield live
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
