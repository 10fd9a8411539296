"""An MCP caller who loses access — token revoked, removed from the configuration, moved to
another org — loses their session and their calls waiting for approval within the re-check
interval: the wait ends, its request is cancelled so no later approval runs it, and the next
request is refused. Over streamable HTTP, stdio in process, and the stdio relay's socket to
the server, with the official ``mcp`` client."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from contextlib import AbstractAsyncContextManager

import httpx
import mcp_types as types
import pytest
from mcp import Client

from hookgate.runtime.deployment import UserSpec
from hookgate.storage.users import revoke_token, sync_declared_users
from tests.adversarial_tally import TALLY
from tests.live_server import LiveServer
from tests.mcp_gateway.world import (
    McpWorld,
    auth,
    http_client,
    one_pending,
    relay_params,
    stdio_params,
)

#: Far beyond the re-check interval (2 s) and the token cache (2 s), for a busy machine.
ENDS_WITHIN_S = 30.0
HOWS = ["revoked", "removed", "moved"]

#: Every call here is git's: the gateways start no time server.
pytestmark = [pytest.mark.both_databases, pytest.mark.coder_servers("git")]


def lose_access(server: LiveServer, world: McpWorld, how: str) -> None:
    """Alice loses access the way another process would take it: the CLI revoking her token,
    or an instance starting with a configuration that drops her or moves her to Other."""
    db = server.runtime.db
    if how == "revoked":
        server.call(revoke_token(db, "alice", by="cli"))
        return
    users: list[UserSpec] = []
    for u in world.deployment().users:
        if u.id != "alice":
            users.append(u)
        elif how == "moved":
            users.append(dataclasses.replace(u, org="other"))
    server.call(sync_declared_users(db, users))


def client_for(transport: str, server: LiveServer, world: McpWorld
               ) -> AbstractAsyncContextManager[Client]:
    if transport == "http":
        return http_client(f"{server.url}/mcp/coder", "alice")
    if transport == "relay":
        return Client(relay_params(server.url, "coder", "alice"))
    return Client(stdio_params(world, "coder", "alice"))


async def request_status(api: httpx.AsyncClient, request_id: str) -> str:
    r = await api.get(f"/api/confirmations/{request_id}", headers=auth("bob"))
    assert r.status_code == 200, r.text
    return str(r.json()["status"])


@pytest.mark.parametrize("transport", ["http", "stdio", "relay"])
@pytest.mark.parametrize("how", HOWS)
async def test_a_call_waiting_for_approval_ends_with_its_callers_access(
        transport: str, how: str, server: LiveServer, api: httpx.AsyncClient,
        world: McpWorld) -> None:
    args = {"repo_path": str(world.repo), "branch_name": f"after-{how}"}
    async with client_for(transport, server, world) as client:
        call = asyncio.create_task(client.call_tool("mcp__git__git_create_branch", args))
        request = await one_pending(api)
        lose_access(server, world, how)
        ended: types.CallToolResult | Exception
        try:
            ended = await asyncio.wait_for(call, ENDS_WITHIN_S)
        except TimeoutError:
            raise AssertionError("the call outlived its caller's access") from None
        except Exception as exc:  # the session ended under the call
            ended = exc
        if isinstance(ended, types.CallToolResult):
            assert ended.is_error
            shown = json.dumps(ended.model_dump(mode="json"))
            assert "lost access" in shown and "did not run" in shown, shown
        # The session is over: the next request is refused.
        with pytest.raises(Exception):  # noqa: B017 - the client's error differs by transport
            await asyncio.wait_for(client.list_tools(), ENDS_WITHIN_S)
    # The wait was cancelled, not left pending: no approval made later runs it.
    await no_longer_pending(api, request["id"])
    decided = await api.post(f"/api/confirmations/{request['id']}/respond",
                             json={"decision": "approve"}, headers=auth("bob"))
    assert decided.status_code == 409, decided.text
    ran = world.branches() != ["main"]
    TALLY.record(f"MCP call waiting for approval after its user was {how} ({transport})", ran)
    assert not ran


async def test_an_idle_http_session_of_a_revoked_user_answers_401(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    async with http_client(f"{server.url}/mcp/coder", "alice") as client:
        assert (await client.list_tools()).tools
        lose_access(server, world, "revoked")  # by another process: its cache may lag
        deadline = asyncio.get_running_loop().time() + ENDS_WITHIN_S
        with pytest.raises(Exception):  # noqa: B017 - the client's error for an HTTP 401
            while asyncio.get_running_loop().time() < deadline:
                await asyncio.wait_for(client.list_tools(), ENDS_WITHIN_S)
                await asyncio.sleep(0.2)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    r = await api.post("/mcp/coder", json=body, headers=auth("alice"))
    assert r.status_code == 401
    TALLY.record("MCP request after revocation", r.status_code != 401)


async def no_longer_pending(api: httpx.AsyncClient, request_id: str) -> str:
    deadline = asyncio.get_running_loop().time() + ENDS_WITHIN_S
    while (status := await request_status(api, request_id)) == "pending":
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"request {request_id} is still pending")
        await asyncio.sleep(0.1)
    return status
