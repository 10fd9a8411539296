"""A downstream server that is slow to come up: the official ``mcp`` client's ``initialize``
is answered before it is up, ``tools/list`` waits for it only ``list_wait_s`` and answers
without its tools, and once it is up the client hears ``tools/list_changed`` and finds them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest

from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import eventually, http_client, make_world, text

SERVER = Path(__file__).with_name("flaky_server.py")


@pytest.fixture
def slow(tmp_path: Path) -> Iterator[tuple[LiveServer, Path]]:
    world = make_world(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}")
    gate = tmp_path / "downstream-may-start"
    config = world.config_path.read_text().replace("mcp_servers:\n", f"""mcp_servers:
  - id: slow
    command: {sys.executable}
    args: [{SERVER}]
    env: {{FLAKY_GATE: "{gate}", FLAKY_LOG: "{tmp_path / 'calls.log'}"}}
    list_wait_s: 0.3
""", 1).replace("agents:\n", """agents:
  - {id: waiter, org: acme, owner: alice, model: idle, mcp: {servers: [slow]}}
""", 1)
    world.config_path.write_text(config)
    with live_server(world.deployment()) as srv:
        yield srv, gate


async def test_initialize_and_a_first_listing_do_not_wait_for_a_slow_downstream(
        slow: tuple[LiveServer, Path]) -> None:
    server, gate = slow
    heard: list[object] = []

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message)

    async with http_client(f"{server.url}/mcp/waiter", "alice", mode="legacy",
                           message_handler=on_message) as client:
        # Initialized while the downstream cannot answer at all (it waits for the gate).
        assert client.server_capabilities.tools is not None
        first = await client.list_tools()
        assert [t.name for t in first.tools] == []
        assert not gate.exists() and not heard
        gate.touch()  # the downstream comes up
        await eventually(lambda: heard, "notifications/tools/list_changed")
        names = [t.name for t in (await client.list_tools()).tools]
        assert "mcp__slow__echo" in names
        result = await client.call_tool("mcp__slow__echo", {"text": "up"})
    assert not result.is_error and text(result) == "up"
