"""``hookgate mcp stdio`` as the subprocess a desktop client starts, driven by the official
``mcp`` client; approvals are decided in the inbox of a real server on the same database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import httpx
import pytest
from mcp import Client

from hookgate.mcp.stdio import StdioRefusal, serve_stdio
from tests.live_server import LiveServer
from tests.mcp_gateway.world import (
    McpWorld,
    audit_rows,
    current_time,
    decide,
    eventually,
    one_pending,
    outcome,
    pending_requests,
    stdio_params,
    text,
)


async def test_a_local_client_lists_and_calls_tools_over_stdio(
        world: McpWorld, server: LiveServer, api: httpx.AsyncClient) -> None:
    async with Client(stdio_params(world, "coder", "alice")) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
    assert {"mcp__time__get_current_time", "mcp__git__git_status"} <= names
    assert not result.is_error and current_time(result)["timezone"] == "UTC"
    rows = await audit_rows(api, tool="mcp__time__get_current_time")
    assert [(r["outcome"], r["user_id"]) for r in rows] == [("ok", "alice")]


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_a_gated_stdio_call_is_decided_in_the_servers_inbox(
        world: McpWorld, server: LiveServer, api: httpx.AsyncClient) -> None:
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    args = {"repo_path": str(world.repo), "branch_name": "from-stdio"}
    async with Client(stdio_params(world, "coder", "alice")) as client:
        call = asyncio.create_task(client.call_tool(
            "mcp__git__git_create_branch", args, progress_callback=on_progress))
        request = await one_pending(api)
        await eventually(lambda: progress, "a progress notification")
        assert world.branches() == ["main"]
        await decide(api, request["id"], "approve")
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error, text(result)
    assert outcome(result)["request_id"] == request["id"]
    assert world.branches() == ["from-stdio", "main"]


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_a_client_restarted_while_waiting_retries_and_the_call_runs_once(
        world: McpWorld, server: LiveServer, api: httpx.AsyncClient) -> None:
    args = {"repo_path": str(world.repo), "branch_name": "survivor"}
    async with Client(stdio_params(world, "coder", "alice")) as client:
        first = asyncio.create_task(client.call_tool("mcp__git__git_create_branch", args))
        request = await one_pending(api)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
    # The client and its gateway process are gone; the request is still waiting.
    assert [r["id"] for r in await pending_requests(api)] == [request["id"]]
    await decide(api, request["id"], "approve")
    assert world.branches() == ["main"]

    async with Client(stdio_params(world, "coder", "alice")) as client:
        retry = await client.call_tool("mcp__git__git_create_branch", args)
        again = await client.call_tool("mcp__git__git_create_branch", args)
    for result in (retry, again):
        assert not result.is_error, text(result)
        assert outcome(result)["status"] == "ok"
    assert "already exists" not in text(again)
    assert world.branches() == ["main", "survivor"]
    assert await pending_requests(api) == []
    rows = await audit_rows(api, tool="mcp__git__git_create_branch")
    assert [(r["outcome"], (r["detail"] or "").startswith("replay:")) for r in rows] == [
        ("ok", False), ("ok", True)]


def test_without_a_token_the_stdio_gateway_refuses_to_start(world: McpWorld) -> None:
    env = {k: v for k, v in os.environ.items() if k != "HOOKGATE_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "mcp", "stdio", "--agent", "coder",
         "--in-process",
         "--config", str(world.config_path)],
        env=env, cwd=world.root, capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert "HOOKGATE_TOKEN" in done.stderr


async def test_a_user_of_another_org_cannot_serve_the_agent(world: McpWorld) -> None:
    with pytest.raises(StdioRefusal) as caught:
        await serve_stdio(world.config(), "coder", "tok-fred-mcp")
    assert "coder" in str(caught.value) and "frozen" in str(caught.value)
    with pytest.raises(StdioRefusal) as unknown:
        await serve_stdio(world.config(), "coder", "not-a-token")
    assert "not a hookgate user's token" in str(unknown.value)
