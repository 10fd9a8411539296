"""The MCP gateway tests' world (see world.py) served by a real server on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import McpWorld, make_world


@pytest.fixture
def world(tmp_path: Path, database_url: str) -> McpWorld:
    return make_world(tmp_path, database_url)


@pytest.fixture
def server(world: McpWorld) -> Iterator[LiveServer]:
    with live_server(world.deployment()) as srv:
        yield srv


@pytest.fixture
async def api(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client
