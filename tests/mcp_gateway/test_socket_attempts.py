"""Hostile input on the MCP socket (hookgate.mcp.session_socket): text that is not JSON, JSON
nested past any parser's depth, bytes that are not UTF-8 in a text frame, a message past the
size limit, a request id used twice at once. Each is refused or answered as an error; none
stops the server or another user's socket, and the socket that sent it either goes on
answering or is closed with the WebSocket code that names why."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import httpx
import pytest

from hookgate.server.limits import DEFAULT_MAX_BODY
from tests.adversarial_tally import TALLY
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.socket_session import Session as SocketSession
from tests.mcp_gateway.world import TOKENS, McpWorld, decide, one_pending, sqlite_world

INITIALIZE = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "attacker", "version": "1"}}}


# One world and one server for the module (each test's own ``api``): every attack reaches
# only its own socket, and what each asserts is that the server and the other sockets are
# unharmed; the one gated call makes its own branch (a fresh name) and the module's only
# request, and one test alone calls the rate-limited time server. So a test finds the
# server as a fresh one would be, and the downstream servers start once per module.
@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> McpWorld:
    return sqlite_world(tmp_path_factory.mktemp("socket-attempts"), sqlite_template)


@pytest.fixture(scope="module")
def server(world: McpWorld) -> Iterator[LiveServer]:
    with live_server(world.deployment()) as srv:
        yield srv


class Session(SocketSession):
    async def alive(self, n: int) -> bool:
        await self.send({"jsonrpc": "2.0", "id": f"ping-{n}", "method": "ping"})
        return "result" in await self.answer(f"ping-{n}")


async def opened(http: aiohttp.ClientSession, server: LiveServer) -> Session:
    ws = await http.ws_connect(f"ws://127.0.0.1:{server.url.rsplit(':', 1)[1]}/mcp/coder",
                               headers={"authorization": f"Bearer {TOKENS['alice']}"},
                               max_msg_size=0)
    session = Session(ws)
    await session.send(INITIALIZE)
    assert "result" in await session.answer("init")
    await session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session


async def test_malformed_messages_are_answered_and_the_session_goes_on(
        server: LiveServer) -> None:
    async with aiohttp.ClientSession() as http:
        session = await opened(http, server)
        await session.ws.send_str("this is not JSON")
        await session.ws.send_str("[" * 100_000 + "]" * 100_000)  # deeper than any parser
        await session.ws.send_str('{"jsonrpc": "2.0", "id": 5, "method": 7}')
        await session.ws.send_bytes(json.dumps(
            {"jsonrpc": "2.0", "id": "b", "method": "ping"}).encode())  # binary: read too
        assert "result" in await session.answer("b")
        survived = await session.alive(1)
        await session.ws.close()
    TALLY.record("malformed messages on the MCP socket stop its session", not survived)
    assert survived


@pytest.mark.parametrize(("frame", "code"), [
    (b"\xed\xa0\x80", 1007),  # a lone surrogate's bytes: not UTF-8, not text
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + b"x" * DEFAULT_MAX_BODY + b'"}',
     1009),  # past the limit on one message
], ids=["not-utf8", "too-large"])
async def test_a_frame_the_socket_cannot_take_closes_it_and_nothing_else(
        server: LiveServer, frame: bytes, code: int) -> None:
    async with aiohttp.ClientSession() as http:
        bystander = await opened(http, server)
        session = await opened(http, server)
        await session.ws.send_frame(frame, aiohttp.WSMsgType.TEXT)
        async with asyncio.timeout(20):
            ended = await session.ws.receive()
        while ended.type == aiohttp.WSMsgType.TEXT:  # a message sent before it read ours
            ended = await session.ws.receive()
        assert ended.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert session.ws.close_code == code
        bystander_ok = await bystander.alive(1)
        fresh = await opened(http, server)
        fresh_ok = await fresh.alive(2)
        for ws in (bystander.ws, fresh.ws):
            await ws.close()
    TALLY.record(f"a frame closing the MCP socket ({code}) reaches other sessions",
                 not (bystander_ok and fresh_ok))
    assert bystander_ok and fresh_ok


async def test_a_request_id_used_twice_at_once_gets_answers_for_both(
        server: LiveServer) -> None:
    async with aiohttp.ClientSession() as http:
        session = await opened(http, server)
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
            "name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}}}
        await session.send(call)
        await session.send(call)
        first = await session.answer(9)
        second = await session.answer(9)
        alive = await session.alive(3)
        await session.ws.close()
    assert {"result", "error"} & set(first) and {"result", "error"} & set(second)
    TALLY.record("a re-used request id on the MCP socket stops its session", not alive)
    assert alive


async def test_a_gated_call_sent_twice_at_once_under_one_id_runs_once(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    # A hostile client sends the same gated call twice at once under one request id on the
    # socket: one request reaches the inbox, and once approved the branch is created once
    # (a second creation would fail with "already exists" in its answer).
    branch = f"twice-{uuid.uuid4().hex[:8]}"
    call = {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {
        "name": "mcp__git__git_create_branch",
        "arguments": {"repo_path": str(world.repo), "branch_name": branch}}}
    async with aiohttp.ClientSession() as http:
        session = await opened(http, server)
        await session.send(call)
        await session.send(call)
        request = await one_pending(api)
        await decide(api, request["id"], "approve")
        answers = [await session.answer(11), await session.answer(11)]
        await session.ws.close()
    shown = json.dumps(answers)
    ran_twice = "already exists" in shown or world.branches().count(branch) != 1
    TALLY.record("a gated call sent twice under one id on the MCP socket ran twice", ran_twice)
    assert not ran_twice, shown
    assert any("result" in a and not a["result"].get("isError") for a in answers), shown
