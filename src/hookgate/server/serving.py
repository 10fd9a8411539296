"""Serve an app with uvicorn (`hookgate.app.build_server`: `hookgate serve`, `hookgate demo`).

The listening socket is bound here, before uvicorn starts, so a busy port is one readable
error instead of a log line and an exit from deep inside uvicorn.
"""

from __future__ import annotations

import errno
import os
import socket
from typing import Any

import uvicorn

from hookgate.runtime.event_loop import asyncio_named
from hookgate.server.http_protocol import BoundedHttpToolsProtocol
from hookgate.server.limits import DEFAULT_MAX_BODY


def uvicorn_config(app: Any, host: str, port: int, *, log_level: str = "warning",
                   graceful_s: int = 5, websockets: bool = False) -> uvicorn.Config:
    """How hookgate's app is served (``hookgate serve`` and the tests' servers alike).

    ``websockets``: serve WebSocket connections (the MCP gateway's, for ``hookgate mcp
    stdio``: mcp/session_socket.py), a client's message at most ``DEFAULT_MAX_BODY`` bytes
    as a request body is. Without it uvicorn imports no WebSocket implementation (~15 ms of
    start-up) and answers an upgrade as a plain request. HTTP is parsed by httptools, with
    h11's bound on a request's head kept (server/http_protocol.py)."""
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                          ws="websockets-sansio" if websockets else "none",
                          ws_max_size=DEFAULT_MAX_BODY, http=BoundedHttpToolsProtocol,
                          timeout_graceful_shutdown=graceful_s)


class Server(uvicorn.Server):
    """uvicorn's server, whose loop is asyncio's for its whole life and says so to sniffio
    (see hookgate.runtime.event_loop)."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        with asyncio_named():
            await super().serve(sockets)


class PortUnavailable(Exception):
    """The address cannot be listened on (in use, not an interface here, no permission)."""


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` for `uvicorn.Server.serve(sockets=[…])`."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        # Made with proto IPPROTO_TCP (socket.create_server leaves it 0): asyncio sets
        # TCP_NODELAY only on such sockets' connections, and without it every response's
        # body waits out the client's delayed ACK behind its headers (~40 ms a request).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(2048)
        except BaseException:
            sock.close()
            raise
        return sock
    except OSError as exc:
        # create_server words errno's message its own way; a name lookup has no errno text.
        reason = (exc.strerror if isinstance(exc, socket.gaierror) or not exc.errno
                  else os.strerror(exc.errno)) or str(exc)
        hint = (" (another server runs there: stop it or pick another --port)"
                if exc.errno == errno.EADDRINUSE else "")
        raise PortUnavailable(f"cannot listen on {host}:{port}: {reason}{hint}") from exc
