"""A downstream server that changes its tools (tests/mcp_gateway/changing_server.py): the
gateway lists them again and tells its connected clients, on the 2026-07-28 protocol through
``subscriptions/listen`` and on the handshake protocol with ``tools/list_changed`` — over
HTTP, and through ``hookgate mcp stdio`` relaying to the server (the listen stream, and the
handshake session's event stream, are the relay's to keep)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import mcp_types as types
import pytest

from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import (
    McpWorld,
    eventually,
    http_client,
    make_world,
    relay_client,
    text,
)

SERVER = Path(__file__).with_name("changing_server.py")

SERVERS = f"""mcp_servers:
  - id: modern
    command: {sys.executable}
    args: [{SERVER}]
  - id: legacy
    command: {sys.executable}
    args: [{SERVER}]
    env: {{CHANGING_ERA: handshake}}
"""
#: ``tinker`` reaches the one changing server its test changes (the gateway starts each
#: server an agent reaches: a second would be a process started for nothing).
AGENT = """agents:
  - id: tinker
    org: acme
    owner: alice
    model: idle
    mcp: {{servers: [{era}]}}
"""


@contextmanager
def changing(tmp_path: Path, database_url: str, era: str
             ) -> Iterator[tuple[McpWorld, LiveServer]]:
    world = make_world(tmp_path, database_url)
    config = world.config_path.read_text()
    config = config.replace("mcp_servers:\n", SERVERS, 1).replace(
        "agents:\n", AGENT.format(era=era), 1)
    world.config_path.write_text(config)
    with live_server(world.deployment()) as srv:
        yield world, srv


@pytest.fixture
def modern(tmp_path: Path, database_url: str) -> Iterator[tuple[McpWorld, LiveServer]]:
    """The world with ``tinker`` reaching the 2026-07-28 changing server."""
    with changing(tmp_path, database_url, "modern") as both:
        yield both


@pytest.fixture
def legacy(tmp_path: Path, database_url: str) -> Iterator[tuple[McpWorld, LiveServer]]:
    """The world with ``tinker`` reaching the handshake-era changing server."""
    with changing(tmp_path, database_url, "legacy") as both:
        yield both


def names(listing: types.ListToolsResult) -> list[str]:
    return sorted(t.name for t in listing.tools)


CONNECT = {"http": http_client, "relay": relay_client}


@pytest.mark.parametrize("via", ["http", "relay"])
async def test_a_listening_client_hears_of_new_downstream_tools_and_can_call_them(
        modern: tuple[McpWorld, LiveServer], via: str) -> None:
    _world, server = modern
    async with CONNECT[via](f"{server.url}/mcp/tinker", "alice") as client:
        assert client.protocol_version == "2026-07-28"
        assert "mcp__modern__vault" not in names(await client.list_tools())
        async with client.listen(tools_list_changed=True) as events:
            unlocked = await client.call_tool("mcp__modern__unlock", {})
            assert text(unlocked) == "unlocked", unlocked
            event = await asyncio.wait_for(events.__anext__(), 15)
        assert type(event).__name__ == "ToolsListChanged"
        listing = await client.list_tools()
        assert "mcp__modern__vault" in names(listing)
        vault = next(t for t in listing.tools if t.name == "mcp__modern__vault")
        assert "code" in vault.input_schema["properties"]
        result = await client.call_tool("mcp__modern__vault", {"code": "42"})
    assert not result.is_error and "vault opened with 42" in text(result)


@pytest.mark.parametrize("via", ["http", "relay"])
async def test_a_handshake_client_gets_tools_list_changed_from_a_handshake_downstream(
        legacy: tuple[McpWorld, LiveServer], via: str) -> None:
    _world, server = legacy
    heard: list[object] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message)

    async with CONNECT[via](f"{server.url}/mcp/tinker", "alice", mode="legacy",
                            message_handler=on_message) as client:
        assert client.protocol_version not in ("2026-07-28",)
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed
        assert "mcp__legacy__vault" not in names(await client.list_tools())
        assert not heard
        await client.call_tool("mcp__legacy__unlock", {})
        await eventually(lambda: heard, "notifications/tools/list_changed")
        assert "mcp__legacy__vault" in names(await client.list_tools())
        result = await client.call_tool("mcp__legacy__vault", {"code": "7"})
    assert not result.is_error and "vault opened with 7" in text(result)


async def test_before_the_change_the_new_tool_is_unknown(
        modern: tuple[McpWorld, LiveServer]) -> None:
    _world, server = modern
    async with http_client(f"{server.url}/mcp/tinker", "alice") as client:
        result = await client.call_tool("mcp__modern__vault", {"code": "1"})
    assert result.is_error and "vault" in text(result)
