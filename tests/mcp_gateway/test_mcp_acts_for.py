"""The MCP gateway with a service identity: the coding agent's token is a service's, its calls
act for the person the ``Hookgate-Acts-For`` header names (the request's initiator), and the
agent's token can never approve its own gated call — over HTTP with the official MCP client
and over the relay's socket, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.live_server import live_server
from tests.mcp_gateway.world import auth, make_world, one_pending, outcome, text

pytestmark = pytest.mark.both_databases

BOT_TOKEN = "tok-coder-bot"
BOT = {"Authorization": f"Bearer {BOT_TOKEN}"}
SAID = "service (agent) identity"


def _world(root: Path, database_url: str) -> Any:
    # Git's tools are the only ones called, and the handshakes call none.
    world = make_world(root, database_url, coder_servers=["git"])
    config = world.config_path.read_text()
    config = config.replace(
        "  - {id: mallory,",
        f"  - {{id: coder-bot, org: acme, kind: service, token: {BOT_TOKEN}}}\n"
        "  - {id: mallory,").replace("confirmation_approver_scope: org_members",
                                     "confirmation_approver_scope: initiator")
    assert "kind: service" in config and "approver_scope: initiator" in config
    world.config_path.write_text(config)
    return world


@asynccontextmanager
async def bot_client(url: str, acts_for: str | None) -> AsyncIterator[Client]:
    headers = dict(BOT)
    if acts_for is not None:
        headers["Hookgate-Acts-For"] = acts_for
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0))
    async with Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def test_a_service_acts_for_the_person_it_names_who_alone_decides(
        tmp_path: Path, database_url: str) -> None:
    world = _world(tmp_path, database_url)
    args = {"repo_path": str(world.repo), "branch_name": "for-bob"}
    with live_server(world.deployment()) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as api, \
                bot_client(f"{srv.url}/mcp/coder", "bob") as client:
            call = asyncio.create_task(client.call_tool("mcp__git__git_create_branch", args))
            request = await one_pending(api)
            assert request["requested_by"] == "bob", request
            for decision in ("approve", "reject"):
                r = await api.post(f"/api/confirmations/{request['id']}/respond",
                                   json={"decision": decision}, headers=BOT)
                assert r.status_code == 403 and SAID in r.text, r.text
            # initiator scope: the person acted for decides, not another member.
            r = await api.post(f"/api/confirmations/{request['id']}/respond",
                               json={"decision": "approve"}, headers=auth("alice"))
            assert r.status_code == 403, r.text
            r = await api.post(f"/api/confirmations/{request['id']}/respond",
                               json={"decision": "approve"}, headers=auth("bob"))
            assert r.status_code == 200, r.text
            result = await asyncio.wait_for(call, 30)
            assert not result.is_error, text(result)
            assert outcome(result)["request_id"] == request["id"]
    assert world.branches() == ["for-bob", "main"]


async def _handshake(url: str, headers: dict[str, str]) -> int:
    """The socket handshake's refusal status, or 101 when it opened."""
    async with aiohttp.ClientSession() as http:
        try:
            ws = await http.ws_connect(url, headers=headers)
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status
        await ws.send_str(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        await ws.receive(timeout=20)
        await ws.close()
        return 101


async def test_acts_for_names_a_person_of_the_org_on_http_and_socket(
        tmp_path: Path, database_url: str) -> None:
    world = _world(tmp_path, database_url)
    with live_server(world.deployment(), websockets=True) as srv:
        url = f"{srv.url}/mcp/coder"
        socket = "ws" + url[4:]
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}
        accept = {"accept": "application/json, text/event-stream"}
        for headers, status, said in (
                ({**BOT, "Hookgate-Acts-For": "mallory"}, 403, "not a user of org 'acme'"),
                ({**BOT, "Hookgate-Acts-For": "coder-bot"}, 403, "service identity"),
                ({**auth("alice"), "Hookgate-Acts-For": "bob"}, 403,
                 "only a service identity"),
                ({**BOT, "Hookgate-Acts-For": "bob"}, 200, ""),
                (auth("alice"), 200, "")):
            async with httpx.AsyncClient(timeout=30) as http:
                r = await http.post(url, json=body, headers={**accept, **headers})
            assert r.status_code == status and said in r.text, r.text
            assert await _handshake(socket, headers) == (101 if status == 200 else status)
