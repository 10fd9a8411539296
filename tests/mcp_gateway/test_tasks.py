"""Gated calls as MCP tasks (SEP-2663, on the 2026-07-28 protocol) through the official
``mcp`` client: a task at once, polled while a person decides, surviving the client's
disconnect; status and ``_meta`` say waiting, approved or rejected."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client, MCPError

from tests.live_server import LiveServer
from tests.mcp_gateway.task_client import (
    DetailedTask,
    TaskHandle,
    Tasks,
    cancel_task,
    get_task,
)
from tests.mcp_gateway.world import (
    McpWorld,
    audit_rows,
    decide,
    eventually,
    http_client,
    one_pending,
    outcome,
    pending_requests,
    stdio_params,
    text,
)


def mcp_url(server: LiveServer) -> str:
    return f"{server.url}/mcp/coder"


async def create_branch_task(client: Client, world: McpWorld, branch: str) -> TaskHandle:
    """A gated call made as a task: the handle comes back at once."""
    args = {"repo_path": str(world.repo), "branch_name": branch}
    handle = await asyncio.wait_for(client.session.call_tool(
        "mcp__git__git_create_branch", args, allow_claimed=True), 10)
    assert isinstance(handle, TaskHandle), handle
    return handle


async def finished(client: Client, task_id: str) -> DetailedTask:
    async def poll() -> DetailedTask | None:
        task = await get_task(client.session, task_id)
        return task if task.status not in ("working", "input_required") else None
    return await eventually(poll, f"task {task_id} finished")


async def left_by_a_stdio_process(world: McpWorld, api: httpx.AsyncClient, *branches: str
                                  ) -> list[tuple[TaskHandle, dict[str, Any]]]:
    """Tasks made through a `hookgate mcp stdio` that has exited since, with their requests."""
    out = []
    async with Client(stdio_params(world, "coder", "alice"), extensions=[Tasks()]) as client:
        for branch in branches:
            handle = await create_branch_task(client, world, branch)
            async def its_request(branch: str = branch) -> list[dict[str, Any]]:
                return [r for r in await pending_requests(api)
                        if r["payload"]["args"]["branch_name"] == branch]
            # Wait for this branch's own request: the earlier branches' are pending already.
            (request,) = await eventually(its_request, f"the pending request for {branch}")
            out.append((handle, request))
    return out


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_a_client_with_tasks_polls_a_gated_call_to_its_approved_result(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    tasks = Tasks()
    args = {"repo_path": str(world.repo), "branch_name": "via-task"}
    async with http_client(mcp_url(server), "alice", extensions=[tasks]) as client:
        assert client.protocol_version == "2026-07-28"
        call = asyncio.create_task(client.call_tool("mcp__git__git_create_branch", args))
        request = await one_pending(api)
        await eventually(lambda: [p for p in tasks.polls
                                  if p.approval()["state"] == "waiting"], "a waiting poll")
        waiting = tasks.polls[-1]
        assert waiting.status == "working" and waiting.result is None
        assert waiting.approval()["request_id"] == request["id"]
        assert request["id"] in (waiting.status_message or "")
        assert world.branches() == ["main"]
        await decide(api, request["id"], "approve")
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error, text(result)
    assert "via-task" in text(result)
    assert outcome(result)["request_id"] == request["id"]
    assert world.branches() == ["main", "via-task"]
    last = tasks.polls[-1]
    assert (last.status, last.approval()["state"]) == ("completed", "approved")


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_the_task_comes_at_once_and_outlives_the_client(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    async with http_client(mcp_url(server), "alice", extensions=[Tasks()]) as client:
        handle = await create_branch_task(client, world, "after-disconnect")
    assert handle.status == "working" and handle.poll_interval_ms
    # The client is gone; the request waits in the inbox all the same.
    request = await one_pending(api)
    await decide(api, request["id"], "approve")

    async with http_client(mcp_url(server), "alice", extensions=[Tasks()]) as client:
        task = await finished(client, handle.task_id)
    assert task.status == "completed"
    assert task.approval() == {"state": "approved", "request_id": request["id"]}
    assert "after-disconnect" in text(task.call_result())
    assert world.branches() == ["after-disconnect", "main"]

    # Another user of the same org, or a made-up id, learns nothing about it.
    async with http_client(mcp_url(server), "bob", extensions=[Tasks()]) as client:
        for task_id in (handle.task_id, "mcpcall-" + "0" * 48 + "-0", "nope"):
            with pytest.raises(MCPError, match="no task"):
                await get_task(client.session, task_id)
    rows = await audit_rows(api, tool="mcp__git__git_create_branch")
    assert [r["outcome"] for r in rows] == ["ok"]


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_a_rejected_task_completes_with_the_refusal_and_nothing_runs(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    async with http_client(mcp_url(server), "alice", extensions=[Tasks()]) as client:
        handle = await create_branch_task(client, world, "refused")
        request = await one_pending(api)
        await decide(api, request["id"], "reject")
        task = await finished(client, handle.task_id)
    assert (task.status, task.approval()["state"]) == ("completed", "rejected")
    result = task.call_result()
    assert result.is_error and "rejected" in text(result)
    assert world.branches() == ["main"]


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_cancelling_a_waiting_task_cancels_its_request(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    async with http_client(mcp_url(server), "alice", extensions=[Tasks()]) as client:
        handle = await create_branch_task(client, world, "cancelled")
        request = await one_pending(api)
        await cancel_task(client.session, handle.task_id)
        assert await pending_requests(api) == []
        task = await get_task(client.session, handle.task_id)
    assert task.approval()["state"] == "cancelled" and task.status == "cancelled"
    assert task.call_result().is_error and request["id"] in text(task.call_result())
    assert world.branches() == ["main"]


@pytest.mark.coder_servers("time")  # the only server it calls
async def test_a_free_call_is_answered_at_once_even_when_the_client_offers_tasks(
        server: LiveServer) -> None:
    async with http_client(mcp_url(server), "alice", extensions=[Tasks()]) as client:
        result = await client.session.call_tool("mcp__time__get_current_time",
                                                {"timezone": "UTC"}, allow_claimed=True)
    assert isinstance(result, types.CallToolResult) and not result.is_error


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_stdio_tasks_outlive_their_process_and_the_next_one_finishes_or_cancels_them(
        world: McpWorld, server: LiveServer, api: httpx.AsyncClient) -> None:
    # The first `hookgate mcp stdio` exits while both requests wait; one is approved while
    # no process follows it: the next process's poll runs it, once. It cancels the other.
    (done, approved), (dropped, abandoned) = await left_by_a_stdio_process(
        world, api, "next-process", "abandoned")
    await decide(api, approved["id"], "approve")
    assert world.branches() == ["main"]

    async with Client(stdio_params(world, "coder", "alice"), extensions=[Tasks()]) as client:
        task = await finished(client, done.task_id)
        again = await get_task(client.session, done.task_id)
        waiting = await get_task(client.session, dropped.task_id)
        assert (waiting.status, waiting.approval()["state"]) == ("working", "waiting")
        await cancel_task(client.session, dropped.task_id)
        cancelled = await get_task(client.session, dropped.task_id)
    assert task.status == "completed" and "next-process" in text(task.call_result())
    assert again.status == "completed" and text(again.call_result()) == text(task.call_result())
    assert (cancelled.status, cancelled.approval()["state"]) == ("cancelled", "cancelled")
    assert await pending_requests(api) == []
    r = await api.get(f"/api/confirmations/{abandoned['id']}", headers={
        "Authorization": "Bearer tok-alice-mcp"})
    assert r.status_code == 200 and r.json()["status"] == "cancelled", r.text
    assert world.branches() == ["main", "next-process"]
    rows = await audit_rows(api, tool="mcp__git__git_create_branch")
    assert [r["outcome"] for r in rows] == ["ok"]
