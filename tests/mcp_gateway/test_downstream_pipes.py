"""A downstream stdio server's stdin as `hookgate.mcp.downstream_stdio` writes it: each message
one line, written to the pipe's own asyncio writer (no anyio checkpoints per write, decision
record 0029), and a write to a server that is gone fails as the SDK's transport fails it. A
``tools/call`` written directly (`hookgate.mcp.pipe_calls`, decision record 0036) gets its
answer from the same reader, and fails as the dispatcher's requests fail when the server
goes away; every other request still goes through the dispatcher."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError, StdioServerParameters
from mcp.shared.message import SessionMessage
from mcp_types import CONNECTION_CLOSED

from hookgate.mcp.downstream_stdio import ServerInput, ServerLines, stdio_server_pipes
from hookgate.mcp.pipe_calls import PipeCalls

#: Says each line of its stdin back on its stdout, then exits when stdin ends.
ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line); sys.stdout.flush()\n"
#: Exits at once.
GONE = "import sys; sys.exit(0)"
#: Answers each request with its method and params; exits at a request for "exit".
ANSWER = """import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("params", {}).get("name") == "exit":
        sys.exit(0)
    if "id" in msg:
        answer = {"jsonrpc": "2.0", "id": msg["id"],
                  "result": {"method": msg["method"], "params": msg.get("params")}}
        if msg.get("params", {}).get("name") == "refused":
            answer = {"jsonrpc": "2.0", "id": msg["id"],
                      "error": {"code": -32602, "message": "no such tool"}}
        sys.stdout.write(json.dumps(answer) + "\\n"); sys.stdout.flush()
"""


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


async def _read(lines: ServerLines, into: list[Any]) -> None:
    # The dispatcher's read loop: what the direct requests do not take is its.
    try:
        while True:
            into.append(await lines.receive())
    except anyio.EndOfStream:
        return


async def test_a_tool_call_goes_onto_the_pipe_and_other_requests_through_the_dispatcher(
        ) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-c", ANSWER])
    async with stdio_server_pipes(params) as (lines, writer):
        assert isinstance(lines, ServerLines) and isinstance(writer, ServerInput)
        fallback: list[tuple[str, Any]] = []

        async def dispatcher(method: str, params: Any, opts: Any = None,
                             **extra: Any) -> dict[str, Any]:
            fallback.append((method, opts))
            return {"via": "dispatcher"}

        async def notify(method: str, params: Any, opts: Any = None) -> None:
            raise AssertionError("nothing to cancel")

        calls = PipeCalls(lines.answers, writer, dispatcher, notify)
        others: list[Any] = []
        reader = asyncio.create_task(_read(lines, others))
        got = await calls.send_raw_request(
            "tools/call", {"name": "echo", "arguments": {"text": "é"}}, {"headers": {}})
        listed = await calls.send_raw_request("tools/list", None, {"headers": {}})
        progress = await calls.send_raw_request(
            "tools/call", {"name": "echo"}, {"on_progress": print})
        with pytest.raises(MCPError) as refused:
            await calls.send_raw_request("tools/call", {"name": "refused"})
        reader.cancel()
    assert got == {"method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "é"}}}
    assert listed == progress == {"via": "dispatcher"}
    assert [method for method, _ in fallback] == ["tools/list", "tools/call"]
    assert refused.value.code == -32602 and refused.value.message == "no such tool"
    assert others == []  # every answer was a direct request's


async def test_a_tool_call_waiting_when_the_server_goes_away_fails_as_connection_closed(
        ) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-c", ANSWER])
    async with stdio_server_pipes(params) as (lines, writer):
        assert isinstance(lines, ServerLines) and isinstance(writer, ServerInput)

        async def unused(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("not the dispatcher's")

        calls = PipeCalls(lines.answers, writer, unused, unused)
        reader = asyncio.create_task(_read(lines, []))
        with anyio.fail_after(10), pytest.raises(MCPError) as closed:
            await calls.send_raw_request("tools/call", {"name": "exit"})
        await reader
        with pytest.raises(MCPError) as after:  # a later call fails at once
            await calls.send_raw_request("tools/call", {"name": "echo"})
    assert closed.value.code == after.value.code == CONNECTION_CLOSED
