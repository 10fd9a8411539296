"""``hookgate mcp stdio`` as a thin client of a running ``hookgate serve``: driven by the
official ``mcp`` client, it has only HOOKGATE_URL and HOOKGATE_TOKEN — no configuration, no
database, no secrets key — and relays everything to the server's gateway, over its one
WebSocket (the default) or an HTTP request per message (``--connection http``, and whenever
the socket is not there): the tools, a gated call decided in the server's inbox (with
progress while it waits), both protocol eras. What it lacks it says in one line, exiting 2.
A socket that closes under a request answers it with an error and the relay goes on over
HTTP; a server's message never becomes two lines on the client's stdin."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from aiohttp import web
from mcp import Client, StdioServerParameters
from mcp_types import CONNECTION_CLOSED, PROTOCOL_VERSION_META_KEY

from hookgate.mcp.envelope import Envelope
from hookgate.mcp.pipes import LineWriter
from hookgate.mcp.refusal import StdioRefusal
from hookgate.mcp.relay import Relay, proxy_for, relay_stdio
from hookgate.mcp.relay_socket import SocketRelay, open_socket
from tests.adversarial_tally import TALLY
from tests.instances import Instance
from tests.live_server import free_port, live_server
from tests.mcp_gateway.world import (
    REPO_ROOT,
    TOKENS,
    McpWorld,
    current_time,
    decide,
    eventually,
    make_world,
    one_pending,
    outcome,
    text,
)


class Served:
    def __init__(self, world: McpWorld, server: Instance, bare: Path) -> None:
        self.world, self.server, self.bare = world, server, bare

    def environ(self, **env: str) -> dict[str, str]:
        """This machine's environment without any HOOKGATE_ variable, plus ``env``."""
        out = {k: v for k, v in os.environ.items() if not k.startswith("HOOKGATE_")}
        out["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        out.update(env)
        return out

    def params(self, user: str = "alice", agent: str = "coder",
               connection: str = "socket") -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=["-m", "hookgate.cli.main", "mcp", "stdio", "--agent", agent,
                  "--connection", connection],
            env=self.environ(HOOKGATE_URL=self.server.url, HOOKGATE_TOKEN=TOKENS[user]),
            cwd=str(self.bare))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("relay")
    world = make_world(root, f"sqlite+aiosqlite:///{root / 'hookgate.db'}")
    server = Instance("serve", world.config_path, root)
    server.spawn()
    # Where the client starts it: a folder with nothing of the server's in it.
    with tempfile.TemporaryDirectory(prefix="developer-") as bare:
        try:
            server.wait_up()
            yield Served(world, server, Path(bare))
        finally:
            server.stop()


@pytest.fixture(params=["socket", "http"])
def connection(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_client_lists_and_calls_tools_through_the_server_with_only_url_and_token(
        served: Served, connection: str) -> None:
    # The handshake protocol (over HTTP its session id and event stream are the relay's to
    # keep; over the socket the server keeps the session).
    async with Client(served.params(connection=connection), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
    assert {"mcp__time__get_current_time", "mcp__git__git_create_branch"} <= names
    assert not result.is_error and current_time(result)["timezone"] == "UTC"
    assert list(served.bare.iterdir()) == []  # no database, no key, nothing written here


async def test_a_gated_call_waits_with_progress_and_runs_once_approved_in_the_inbox(
        served: Served, connection: str) -> None:
    mode = "auto"  # the 2026-07-28 protocol: over HTTP the relay repeats its envelope
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    branch = f"relayed-{mode}-{connection}"
    args = {"repo_path": str(served.world.repo), "branch_name": branch}
    async with httpx.AsyncClient(base_url=served.server.url, timeout=30) as api, \
            Client(served.params(connection=connection), mode=mode) as client:
        call = asyncio.create_task(client.call_tool(
            "mcp__git__git_create_branch", args, progress_callback=on_progress))
        request = await one_pending(api)
        await eventually(lambda: progress, "a progress notification")
        assert branch not in served.world.branches()
        await decide(api, request["id"], "approve")
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error, text(result)
    assert outcome(result)["request_id"] == request["id"]
    assert branch in served.world.branches()
    assert request["id"] in str(progress[0])


def refusal(served: Served, *args: str, **env: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "mcp", "stdio", *args],
        env=served.environ(**env), cwd=served.bare, capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    return line


def test_without_a_server_url_it_exits_2_with_one_line(served: Served) -> None:
    line = refusal(served, "--agent", "coder", HOOKGATE_TOKEN=TOKENS["alice"])
    assert "set HOOKGATE_URL" in line and "--in-process" in line


@pytest.mark.parametrize(("url", "token", "said"), [
    ("closed", "alice", "cannot reach hookgate"),
    ("served", "nobody", "not valid"),
    ("served", "fred", "404"),  # Frozen's user: no gateway for ACME's agent
    ("served", None, "set HOOKGATE_TOKEN"),
])
async def test_what_is_missing_is_one_line_before_anything_is_relayed(
        served: Served, url: str, token: str | None, said: str) -> None:
    base = served.server.url if url == "served" else f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StdioRefusal) as refused:
        await relay_stdio(base, "coder", TOKENS.get(token or "", token))
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_relay_repeats_a_modern_requests_envelope_in_its_headers() -> None:
    # What the gateway checks of a 2026-07-28 request over HTTP, including the Mcp-Param-*
    # header a tool's schema asks for (learnt from the listing that passed by).
    meta = {PROTOCOL_VERSION_META_KEY: "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    envelope = Envelope()
    listing = envelope.headers_for(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    assert listing == {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    schema = {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}}}
    envelope.note({"jsonrpc": "2.0", "id": 1, "result": {
        "tools": [{"name": "mcp__geo__lookup", "inputSchema": schema}]}})
    headers = envelope.headers_for({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "_meta": meta, "name": "mcp__geo__lookup", "arguments": {"region": "eu"}}})
    assert headers["mcp-name"] == "mcp__geo__lookup" and headers["mcp-method"] == "tools/call"
    assert [v for k, v in headers.items() if k.lower().startswith("mcp-param-")] == ["eu"]
    # The handshake protocol: the session carries its version.
    assert envelope.headers_for({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}) == {}


async def test_a_call_the_server_cannot_answer_fails_with_an_error_naming_it() -> None:
    # Fail closed: hookgate gone after the start, the call is not lost in silence; the client
    # gets a JSON-RPC error for it saying which server did not answer.
    url = f"http://127.0.0.1:{free_port()}/mcp/coder"
    out = io.BytesIO()
    async with aiohttp.ClientSession() as http:
        relay = Relay(http, url, LineWriter(out))
        await relay.upward(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                       "params": {"name": "mcp__time__now"}}).encode() + b"\n")
        await eventually(lambda: out.getvalue(), "the relay's answer")
        await relay.aclose()
    [line] = out.getvalue().splitlines()
    answer = json.loads(line)
    assert answer["id"] == 7 and answer["error"]["code"] == CONNECTION_CLOSED
    assert f"hookgate at {url} did not answer" in answer["error"]["message"]


def test_the_relay_goes_through_the_proxy_the_environment_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "inside.example")
    assert proxy_for("https://gate.example/mcp/coder") == "http://proxy.example:3128"
    assert proxy_for("https://inside.example/mcp/coder") is None


# -- the socket -----------------------------------------------------------------------------


def initialize(request_id: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}).encode()


async def test_the_relay_takes_the_servers_socket_and_the_server_keeps_the_session(
        served: Served) -> None:
    url = f"{served.server.url}/mcp/coder"
    out = io.BytesIO()
    async with aiohttp.ClientSession(
            headers={"authorization": f"Bearer {TOKENS['alice']}"}) as http:
        socket = await open_socket(http, url)
        assert socket is not None, "hookgate serve offers the MCP socket"
        writer = LineWriter(out)
        relay = Relay(http, url, writer, SocketRelay(socket, url, writer))
        await relay.upward(initialize() + b"\n")
        await relay.upward(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        await relay.upward(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}\n')
        await eventually(lambda: len(out.getvalue().splitlines()) >= 2, "two answers")
        # Over the socket: no HTTP session was opened (the server holds the session).
        assert relay.session_id is None and relay.socket is not None and relay.socket.open
        await relay.aclose()
    answers = {m["id"]: m for m in map(json.loads, out.getvalue().splitlines())}
    assert answers[1]["result"]["serverInfo"]
    assert "mcp__time__get_current_time" in {t["name"] for t in answers[2]["result"]["tools"]}


async def test_against_a_server_without_sockets_the_relay_posts_each_message(
        tmp_path: Path) -> None:
    # A server that serves no WebSocket (an older hookgate, or one without the websockets
    # package) answers the upgrade as a plain request: the relay goes on over HTTP.
    world = make_world(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}")
    out = io.BytesIO()
    with live_server(world.deployment(), websockets=False) as srv:
        url = f"{srv.url}/mcp/coder"
        async with aiohttp.ClientSession(
                headers={"authorization": f"Bearer {TOKENS['alice']}"}) as http:
            assert await open_socket(http, url) is None
            relay = Relay(http, url, LineWriter(out))
            await relay.upward(initialize() + b"\n")
            await eventually(lambda: out.getvalue(), "the answer")
            assert relay.session_id is not None  # the HTTP gateway's session
            await relay.aclose()
    assert json.loads(out.getvalue().splitlines()[0])["result"]["serverInfo"]


@pytest.mark.parametrize(("token", "agent", "status", "said"), [
    ("nobody", "coder", 401, "not valid"),
    (None, "coder", 401, "missing bearer token"),
    ("fred", "coder", 404, "no MCP gateway"),  # another org's user
    ("alice", "nosuch", 404, "no MCP gateway"),
])
async def test_the_socket_refuses_what_the_gateway_refuses_before_it_opens(
        served: Served, token: str | None, agent: str, status: int, said: str) -> None:
    headers = {} if token is None else {
        "authorization": f"Bearer {TOKENS.get(token, token)}"}
    url = f"ws://{served.server.url.removeprefix('http://')}/mcp/{agent}"
    async with aiohttp.ClientSession(headers=headers) as http:
        refused_with: int | None = None
        try:
            opened = await http.ws_connect(url)
            await opened.close()
        except aiohttp.WSServerHandshakeError as refused:
            refused_with = refused.status
    TALLY.record(f"MCP socket opened with {token or 'no token'} for {agent}",
                 refused_with is None)
    assert refused_with == status
    # The handshake's answer carries the same one-line reason as the HTTP gateway's.
    host, port = served.server.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    auth = "" if token is None else f"Authorization: Bearer {TOKENS.get(token, token)}\r\n"
    writer.write((f"GET /mcp/{agent} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n{auth}\r\n").encode())
    await writer.drain()
    answer = (await asyncio.wait_for(reader.read(65536), 20)).decode()
    writer.close()
    assert answer.startswith(f"HTTP/1.1 {status}") and said in answer, answer


class ScriptedSocketServer:
    """A WebSocket server on loopback that answers each message by ``answer`` (a list of
    frames to send, or None to close the socket)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.received: list[str] = []

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for frame in ws:
            self.received.append(frame.data)
            frames = self.answer(json.loads(frame.data))
            if frames is None:
                await ws.close(code=1012)
                break
            for data in frames:
                await ws.send_str(data)
        return ws

    async def __aenter__(self) -> str:
        app = web.Application()
        app.router.add_get("/mcp/coder", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        port = free_port()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()
        return f"http://127.0.0.1:{port}/mcp/coder"

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.cleanup()


async def test_a_socket_closing_under_a_request_answers_it_and_the_relay_goes_on_over_http(
        ) -> None:
    # The server stops with a call in flight: the client is not left waiting, and what it
    # sends next goes as HTTP requests (here to a port nobody serves: an error naming it).
    out = io.BytesIO()
    async with ScriptedSocketServer(lambda message: None) as url, aiohttp.ClientSession() as http:
        socket = await open_socket(http, url)
        assert socket is not None
        writer = LineWriter(out)
        relay = Relay(http, url, writer, SocketRelay(socket, url, writer))
        await relay.upward(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
                           b'"params": {"name": "mcp__time__now"}}\n')
        await eventually(lambda: out.getvalue(), "the answer to the request in flight")
        [line] = out.getvalue().splitlines()
        answer = json.loads(line)
        assert answer["id"] == 7 and answer["error"]["code"] == CONNECTION_CLOSED
        assert "closed" in answer["error"]["message"] and url in answer["error"]["message"]
        await eventually(lambda: not relay.socket.open if relay.socket else True, "closed")
    async with aiohttp.ClientSession() as http:  # the server is gone now
        relay.http = http
        await relay.upward(b'{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}\n')
        await eventually(lambda: len(out.getvalue().splitlines()) == 2, "the HTTP attempt")
        await relay.aclose()
    second = json.loads(out.getvalue().splitlines()[1])
    assert second["id"] == 8 and f"hookgate at {url} did not answer" in \
        second["error"]["message"]
    assert relay.socket is None  # the relay knows the socket is gone


async def test_a_servers_message_with_line_breaks_is_still_one_line_on_stdin() -> None:
    # Pretty-printed JSON, a break after a value, a CR: each reaches the client as exactly
    # one line that parses to the message the server sent.
    sent = [json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"a": [1, 2]}}, indent=2),
            '{"jsonrpc": "2.0",\r\n "method": "notifications/tools/list_changed"}',
            '{"jsonrpc": "2.0", "id": 1, "result": {"text": "x\\ny"}}\n\n']
    out = io.BytesIO()
    async with ScriptedSocketServer(lambda message: sent) as url, \
            aiohttp.ClientSession() as http:
        socket = await open_socket(http, url)
        assert socket is not None
        relay = SocketRelay(socket, url, LineWriter(out))
        await relay.upward(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}',
                           {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        await eventually(lambda: len(out.getvalue().splitlines()) >= 3, "three lines")
        await relay.aclose()
    lines = out.getvalue().splitlines()
    assert [json.loads(line) for line in lines] == [json.loads(s) for s in sent]
    smuggled = len(lines) != len(sent)
    TALLY.record("a socket message split into several stdin lines", smuggled)
    assert not smuggled


async def test_a_large_result_from_the_server_reaches_the_client_over_the_socket() -> None:
    # A tool's result may be far larger than a request body (the HTTP relay takes events up
    # to 256 MB): over the socket it comes through as one line, the socket stays open.
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "x" * (3 * 1024 * 1024)}]}})
    out = io.BytesIO()
    async with ScriptedSocketServer(lambda message: [big]) as url, \
            aiohttp.ClientSession() as http:
        socket = await open_socket(http, url)
        assert socket is not None
        relay = SocketRelay(socket, url, LineWriter(out))
        await relay.upward(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}',
                           {"jsonrpc": "2.0", "id": 1, "method": "tools/call"})
        await eventually(lambda: out.getvalue().endswith(b"\n"), "the answer")
        still_open = relay.open
        await relay.aclose()
    [line] = out.getvalue().splitlines()
    assert json.loads(line) == json.loads(big) and still_open
