"""The socket `hookgate serve` listens on: its connections send without Nagle's delay (a
response body written after its headers must not wait for the client's delayed ACK), and
a busy port is still one readable error."""

from __future__ import annotations

import asyncio
import socket

import pytest

from hookgate.server.serving import PortUnavailable, listen


async def test_connections_accepted_on_the_served_socket_have_tcp_nodelay() -> None:
    sock = listen("127.0.0.1", 0)
    assert sock.proto == socket.IPPROTO_TCP
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accepted(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = writer.get_extra_info("socket")
        seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=sock)
    try:
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(seen, 10) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()


def test_a_busy_port_is_one_readable_error() -> None:
    taken = listen("127.0.0.1", 0)
    try:
        with pytest.raises(PortUnavailable, match="in use"):
            listen("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()
