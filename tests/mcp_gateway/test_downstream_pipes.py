"""A downstream stdio server's stdin as `hookgate.mcp.downstream_stdio` writes it: each message
one line, written to the pipe's own asyncio writer (no anyio checkpoints per write, decision
record 0029), and a write to a server that is gone fails as the SDK's transport fails it."""

from __future__ import annotations

import sys

import anyio
import mcp_types as types
import pytest
from mcp import StdioServerParameters
from mcp.shared.message import SessionMessage

from hookgate.mcp.downstream_stdio import ServerInput, stdio_server_pipes

#: Says each line of its stdin back on its stdout, then exits when stdin ends.
ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line); sys.stdout.flush()\n"
#: Exits at once.
GONE = "import sys; sys.exit(0)"


def _ping(request_id: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))


async def test_messages_go_through_the_pipes_asyncio_writer() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-c", ECHO])
    async with stdio_server_pipes(params) as (lines, writer):
        assert isinstance(writer, ServerInput)
        assert writer.writes_directly  # anyio's stream still wraps an asyncio writer
        for request_id in (1, 2, 3):
            await writer.send(_ping(request_id))
        echoed = [await lines.receive() for _ in range(3)]
    assert [m.message.id for m in echoed if isinstance(m, SessionMessage)] == [1, 2, 3]


async def test_a_write_to_a_server_that_is_gone_fails_as_a_broken_stream() -> None:
    params = StdioServerParameters(command=sys.executable, args=["-c", GONE])
    async with stdio_server_pipes(params) as (lines, writer):
        with anyio.fail_after(10), pytest.raises(anyio.BrokenResourceError):
            while True:  # the first writes may land in the pipe before the exit is seen
                await writer.send(_ping(1))
                await anyio.sleep(0.05)
        assert writer.closed
        with pytest.raises(anyio.ClosedResourceError):
            await writer.send(_ping(2))
        with pytest.raises(anyio.EndOfStream):
            await lines.receive()
