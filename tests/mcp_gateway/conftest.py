"""The MCP gateway tests' world (see world.py) served by a real server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import CODER_SERVERS, McpWorld, api_client, make_world


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "coder_servers(*ids): the only MCP servers the world's coder agent reaches "
        "(a test that uses one server's tools starts no other; default: time and git)")


@pytest.fixture
def world(request: pytest.FixtureRequest, tmp_path: Path, database_url: str) -> McpWorld:
    marker = request.node.get_closest_marker("coder_servers")
    return make_world(tmp_path, database_url,
                      coder_servers=marker.args if marker is not None else CODER_SERVERS)


@pytest.fixture
def server(world: McpWorld) -> Iterator[LiveServer]:
    with live_server(world.deployment()) as srv:
        yield srv


@pytest.fixture
async def api(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(server) as client:
        yield client
