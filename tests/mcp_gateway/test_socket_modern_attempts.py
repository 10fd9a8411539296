"""Hostile input on an MCP socket that speaks the 2026-07-28 protocol (each request carries
its envelope; hookgate.mcp.session_socket serves it with the SDK's loop of that era, reading
the socket itself): NaN and lone surrogates in a call's arguments, JSON nested past any
parser's depth, a request id used twice at once, a message past the size limit, frames
before the first request, a handshake after it. Each is answered as an error or refused; the
session goes on answering, and nothing reaches the downstream server or another session."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import mcp_types as types
import pytest
from mcp_types.version import LATEST_MODERN_VERSION

from hookgate.server.limits import DEFAULT_MAX_BODY
from tests.adversarial_tally import TALLY
from tests.live_server import LiveServer
from tests.mcp_gateway.socket_session import ANSWER_WITHIN_S
from tests.mcp_gateway.socket_session import Session as SocketSession
from tests.mcp_gateway.world import TOKENS

ENVELOPE = {types.PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION,
            types.CLIENT_INFO_META_KEY: {"name": "attacker", "version": "1"},
            types.CLIENT_CAPABILITIES_META_KEY: {}}
TIME_TOOL = "mcp__time__get_current_time"

#: Every call here is the time server's: the socket's session starts no git server.
pytestmark = pytest.mark.coder_servers("time")


def request(request_id: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**params, "_meta": ENVELOPE}}


def call(request_id: Any, arguments: Any) -> dict[str, Any]:
    return request(request_id, "tools/call", name=TIME_TOOL, arguments=arguments)


class Session(SocketSession):
    async def works(self, n: int) -> bool:
        """A real call still runs through the gateway on this session."""
        await self.send(call(f"check-{n}", {"timezone": "UTC"}))
        answered = await self.answer(f"check-{n}")
        result = answered.get("result") or {}
        return not result.get("isError", True) and "UTC" in json.dumps(result)


async def opened(http: aiohttp.ClientSession, server: LiveServer) -> Session:
    port = server.url.rsplit(":", 1)[1]
    ws = await http.ws_connect(f"ws://127.0.0.1:{port}/mcp/coder",
                               headers={"authorization": f"Bearer {TOKENS['alice']}"},
                               max_msg_size=0)
    return Session(ws)


async def test_frames_before_the_first_request_and_a_handshake_after_it(
        server: LiveServer) -> None:
    async with aiohttp.ClientSession() as http:
        session = await opened(http, server)
        # Before the first request: a line that is not JSON and a notification.
        await session.ws.send_str("not JSON at all")
        await session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await session.send(request("list", "tools/list"))
        listed = await session.answer("list")
        await session.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "attacker", "version": "1"}}})
        handshake = await session.answer("init")
        works = await session.works(1)
        await session.ws.close()
    assert TIME_TOOL in json.dumps(listed["result"])
    assert handshake["error"]["code"] == types.UNSUPPORTED_PROTOCOL_VERSION
    assert works


@pytest.mark.parametrize("arguments", [
    '{"timezone": NaN}',
    '{"timezone": Infinity}',
    '{"timezone": "\\ud800"}',  # an escaped lone surrogate: valid UTF-8 text
    '{"timezone": "UTC", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
], ids=["nan", "infinity", "lone-surrogate", "deep"])
async def test_hostile_arguments_are_answered_as_errors_and_the_session_goes_on(
        server: LiveServer, arguments: str) -> None:
    async with aiohttp.ClientSession() as http:
        session = await opened(http, server)
        assert await session.works(0)
        envelope = json.dumps(ENVELOPE)
        await session.ws.send_str(
            '{"jsonrpc": "2.0", "id": "bad", "method": "tools/call", "params": {"name": "'
            + TIME_TOOL + '", "arguments": ' + arguments + ', "_meta": ' + envelope + "}}")
        # A message that does not parse has no id to answer: the session goes on.
        await session.send(request("after", "ping"))
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(ANSWER_WITHIN_S):
            while not any(m.get("id") == "after" for m in seen):
                frame = await session.ws.receive()
                assert frame.type == aiohttp.WSMsgType.TEXT, frame
                seen.append(json.loads(frame.data))
        works = await session.works(1)
        await session.ws.close()
    bad = [m for m in seen if m.get("id") == "bad"]
    ran = any("result" in m and not m["result"].get("isError") for m in bad)
    TALLY.record("hostile arguments on a 2026-07-28 MCP socket ran a call", ran)
    TALLY.record("hostile arguments on a 2026-07-28 MCP socket stop its session", not works)
    assert not ran, bad
    assert works


async def test_a_request_id_used_twice_at_once_gets_answers_for_both(
        server: LiveServer) -> None:
    async with aiohttp.ClientSession() as http:
        session = await opened(http, server)
        await session.send(call(9, {"timezone": "UTC"}))
        await session.send(call(9, {"timezone": "UTC"}))
        first = await session.answer(9)
        second = await session.answer(9)
        works = await session.works(1)
        await session.ws.close()
    assert {"result", "error"} & set(first) and {"result", "error"} & set(second)
    TALLY.record("a re-used request id on a 2026-07-28 MCP socket stops its session",
                 not works)
    assert works


async def test_a_message_past_the_limit_closes_only_its_socket(server: LiveServer) -> None:
    async with aiohttp.ClientSession() as http:
        bystander = await opened(http, server)
        assert await bystander.works(0)
        session = await opened(http, server)
        assert await session.works(0)
        await session.send(call("huge", {"timezone": "UTC", "pad": "x" * DEFAULT_MAX_BODY}))
        async with asyncio.timeout(ANSWER_WITHIN_S):
            ended = await session.ws.receive()
            while ended.type == aiohttp.WSMsgType.TEXT:
                ended = await session.ws.receive()
        bystander_works = await bystander.works(1)
        await bystander.ws.close()
    assert session.ws.close_code == 1009
    TALLY.record("a message past the limit on a 2026-07-28 MCP socket reaches another "
                 "session", not bystander_works)
    assert bystander_works
