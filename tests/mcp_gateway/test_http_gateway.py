"""The MCP gateway over streamable HTTP at ``/mcp/{agent_id}`` of a real server on loopback,
driven by the official ``mcp`` client, with ``mcp-server-time`` and ``mcp-server-git``
(installed from PyPI) behind it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import (
    McpWorld,
    api_client,
    audit_rows,
    current_time,
    decide,
    eventually,
    http_client,
    make_world,
    one_pending,
    outcome,
    pending_requests,
    sqlite_world,
    text,
)


def mcp_url(server: LiveServer, agent: str = "coder") -> str:
    return f"{server.url}/mcp/{agent}"


# The tests that only look (listings, requests refused before any session, a session's
# owner) share one world and server per module: none calls a tool, writes a row a test
# reads or changes the repository, so each finds them as it would a fresh one. The tests
# that call tools keep a world of their own (``server``): audit rows, the rate limit's
# counts and the repository's branches are theirs to assert on.
@pytest.fixture(scope="module")
def looked_at(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
              ) -> Iterator[LiveServer]:
    world = sqlite_world(tmp_path_factory.mktemp("looked-at"), sqlite_template)
    with live_server(world.deployment()) as srv:
        yield srv


@pytest.fixture
async def looked_at_api(looked_at: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with api_client(looked_at) as client:
        yield client


async def test_tools_list_shows_the_agents_downstream_tools_with_their_hints(
        looked_at: LiveServer) -> None:
    async with http_client(mcp_url(looked_at), "alice") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"mcp__time__get_current_time", "mcp__time__convert_time", "mcp__git__git_status",
            "mcp__git__git_create_branch", "mcp__git__git_reset"} <= set(tools)
    clock = tools["mcp__time__get_current_time"]
    assert "timezone" in clock.input_schema["properties"]
    assert clock.annotations is not None and clock.annotations.read_only_hint is True
    reset = tools["mcp__git__git_reset"]
    assert reset.annotations is not None and reset.annotations.read_only_hint is False


async def test_an_agent_with_single_tools_sees_only_those(looked_at: LiveServer) -> None:
    async with http_client(mcp_url(looked_at, "archivist"), "fred") as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
    assert names == ["mcp__git__git_log", "mcp__git__git_reset", "mcp__git__git_status"]


@pytest.mark.coder_servers("time")  # the only server it calls
async def test_a_free_call_runs_downstream_and_is_audited(
        server: LiveServer, api: httpx.AsyncClient) -> None:
    async with http_client(mcp_url(server), "alice") as client:
        result = await client.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
    assert not result.is_error, text(result)
    assert current_time(result)["timezone"] == "UTC"
    assert outcome(result)["status"] == "ok"
    rows = await audit_rows(api, tool="mcp__time__get_current_time")
    assert [(r["outcome"], r["execution_path"], r["user_id"]) for r in rows] == [
        ("ok", "mcp", "alice")]


async def test_no_token_a_bad_token_or_another_orgs_agent_get_nothing(
        looked_at_api: httpx.AsyncClient) -> None:
    api = looked_at_api
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert (await api.post("/mcp/coder", json=body)).status_code == 401
    bad = {"Authorization": "Bearer nope"}
    assert (await api.post("/mcp/coder", json=body, headers=bad)).status_code == 401
    other = {"Authorization": "Bearer tok-mallory-mcp"}
    r = await api.post("/mcp/coder", json=body, headers=other)
    assert r.status_code == 404 and "coder" in r.text
    assert (await api.post("/mcp/nobody", json=body, headers=other)).status_code == 404


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_a_gated_call_waits_for_the_inbox_and_runs_once_approved(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    args = {"repo_path": str(world.repo), "branch_name": "feature-x"}
    async with http_client(mcp_url(server), "alice") as client:
        call = asyncio.create_task(client.call_tool(
            "mcp__git__git_create_branch", args, progress_callback=on_progress))
        request = await one_pending(api)
        assert request["payload"]["tool_name"] == "mcp__git__git_create_branch"
        assert request["payload"]["args"] == args
        assert world.branches() == ["main"]  # nothing ran while waiting
        await eventually(lambda: progress, "a progress notification while waiting")
        assert request["id"] in (progress[0][1] or "")
        assert not call.done()
        await decide(api, request["id"], "approve")
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error, text(result)
    assert outcome(result) | {"request_id": request["id"]} == outcome(result)
    assert "feature-x" in text(result)
    assert world.branches() == ["feature-x", "main"]


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_a_rejected_call_never_reaches_the_downstream_server(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    args = {"repo_path": str(world.repo), "branch_name": "never"}
    async with http_client(mcp_url(server), "alice") as client:
        call = asyncio.create_task(client.call_tool("mcp__git__git_create_branch", args))
        request = await one_pending(api)
        await decide(api, request["id"], "reject")
        result = await asyncio.wait_for(call, 30)
    assert result.is_error
    assert "rejected" in text(result) and "did not run" in text(result)
    assert outcome(result)["blocked_by"] == "approval_gate"
    assert world.branches() == ["main"]
    rows = await audit_rows(api, tool="mcp__git__git_create_branch")
    assert [(r["outcome"], r["blocked_by"]) for r in rows] == [("blocked", "approval_gate")]


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_a_when_rule_gates_only_the_calls_it_matches(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    async with http_client(mcp_url(server), "alice") as client:
        small = await client.call_tool("mcp__git__git_log",
                                       {"repo_path": str(world.repo), "max_count": 5})
        assert not small.is_error and "first" in text(small)
        assert await pending_requests(api) == []
        big = asyncio.create_task(client.call_tool(
            "mcp__git__git_log", {"repo_path": str(world.repo), "max_count": 500}))
        request = await one_pending(api)
        await decide(api, request["id"], "reject")
        assert (await asyncio.wait_for(big, 30)).is_error


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_requesting_user_cannot_approve_through_elicitation(
        tmp_path: Path, database_url: str, mode: str) -> None:
    # With a public URL the gateway asks the client (URL-mode elicitation) to open the
    # inbox; the client's user answering "accept" decides nothing. On the handshake protocol
    # it is a request of the server; on 2026-07-28 an input_required result, after which
    # the client calls again and waits.
    world = make_world(tmp_path, database_url, public_url="https://gate.example",
                       coder_servers=["git"])  # the only server it calls
    elicited: list[Any] = []

    async def accept(context: Any, params: Any) -> Any:
        import mcp_types as types

        elicited.append(params)
        return types.ElicitResult(action="accept")

    with live_server(world.deployment()) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as api:
            args = {"repo_path": str(world.repo), "branch_name": "sneaky"}
            async with http_client(mcp_url(srv), "alice", mode=mode,
                                   elicitation_callback=accept) as client:
                call = asyncio.create_task(
                    client.call_tool("mcp__git__git_create_branch", args))
                request = await one_pending(api)
                await eventually(lambda: elicited, "a URL-mode elicitation")
                assert elicited[0].mode == "url"
                assert elicited[0].url == f"https://gate.example/#/confirmations/{request['id']}"
                await asyncio.sleep(0.5)
                assert not call.done()
                assert world.branches() == ["main"]
                still = await api.get(f"/api/confirmations/{request['id']}",
                                      headers={"Authorization": "Bearer tok-alice-mcp"})
                assert still.json()["status"] == "pending"
                await decide(api, request["id"], "reject")
                assert (await asyncio.wait_for(call, 30)).is_error
    assert world.branches() == ["main"]


async def test_a_read_only_org_cannot_use_a_destructive_tool(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    (world.repo / "README.md").write_text("changed\n")
    world.git("add", "README.md")
    async with http_client(mcp_url(server, "archivist"), "fred") as client:
        status = await client.call_tool("mcp__git__git_status",
                                        {"repo_path": str(world.repo)})
        reset = await client.call_tool("mcp__git__git_reset", {"repo_path": str(world.repo)})
    assert not status.is_error and "README.md" in text(status)
    assert reset.is_error and outcome(reset)["blocked_by"] == "readonly_guard"
    assert "README.md" in world.git("diff", "--cached", "--name-only")  # still staged
    rows = await audit_rows(api, user="fred")
    assert [(r["tool_name"], r["outcome"]) for r in rows] == [
        ("mcp__git__git_status", "ok"), ("mcp__git__git_reset", "blocked")]


@pytest.mark.coder_servers("time")  # the only server it calls
async def test_the_rate_limit_refuses_calls_over_the_limit_and_audits_each(
        server: LiveServer, api: httpx.AsyncClient) -> None:
    async with http_client(mcp_url(server), "alice") as client:
        results = [await client.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
                   for _ in range(6)]
    assert [r.is_error for r in results] == [False] * 4 + [True] * 2
    assert outcome(results[-1])["blocked_by"] == "connector_rate_limit"
    rows = await audit_rows(api, tool="mcp__time__get_current_time")
    assert [r["outcome"] for r in rows] == ["ok"] * 4 + ["blocked"] * 2


@pytest.mark.coder_servers("git")  # the only server it calls
async def test_unknown_tools_and_bad_arguments_never_run_and_are_audited(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    async with http_client(mcp_url(server), "alice") as client:
        unknown = await client.call_tool("mcp__git__git_Status", {"repo_path": "x"})
        missing = await client.call_tool("mcp__git__git_create_branch", {"branch_name": "b"})
    assert unknown.is_error and "unknown tool" in text(unknown)
    assert missing.is_error and "repo_path" in text(missing)
    assert await pending_requests(api) == []
    rows = await audit_rows(api)
    assert [(r["outcome"], r["blocked_by"]) for r in rows] == [
        ("blocked", "unknown_tool"), ("blocked", "argument_validation")]
    assert world.branches() == ["main"]


@pytest.mark.both_databases
@pytest.mark.coder_servers("git")  # the only server it calls
async def test_a_client_that_disconnects_while_waiting_and_retries_gets_one_execution(
        server: LiveServer, api: httpx.AsyncClient, world: McpWorld) -> None:
    args = {"repo_path": str(world.repo), "branch_name": "once"}
    async with http_client(mcp_url(server), "alice") as client:
        first = asyncio.create_task(client.call_tool("mcp__git__git_create_branch", args))
        request = await one_pending(api)
        first.cancel()  # the client gives up and closes its connection
        with pytest.raises(asyncio.CancelledError):
            await first
    await asyncio.sleep(0.3)
    assert (await api.get(f"/api/confirmations/{request['id']}",
                          headers={"Authorization": "Bearer tok-alice-mcp"})
            ).json()["status"] == "pending"
    await decide(api, request["id"], "approve")
    await eventually(lambda: "once" in world.branches(), "the approved call to run")
    # Its audit row is written after the tool returns (PostToolUse): wait for it, so that
    # the rows below are the three calls' whatever the machine's load.
    for _ in range(300):
        if await audit_rows(api, tool="mcp__git__git_create_branch"):
            break
        await asyncio.sleep(0.05)

    async with http_client(mcp_url(server), "alice") as client:
        retry = await client.call_tool("mcp__git__git_create_branch", args)
        again = await client.call_tool("mcp__git__git_create_branch", args)
    # Had git run a second time it would say the branch exists; the recorded result is
    # handed back instead, and no new request was made.
    for result in (retry, again):
        assert not result.is_error, text(result)
        assert "once" in text(result) and "already exists" not in text(result)
    assert await pending_requests(api) == []
    rows = await audit_rows(api, tool="mcp__git__git_create_branch")
    assert [r["outcome"] for r in rows] == ["ok", "ok", "ok"]
    assert [r["detail"] is not None and r["detail"].startswith("replay:") for r in rows] == [
        False, True, True]
    assert len({r["tool_call_id"] for r in rows}) == 1


@pytest.mark.coder_servers("time")  # the only server it calls
async def test_hostile_arguments_are_refused_before_any_hook_or_downstream_call(
        server: LiveServer, api: httpx.AsyncClient) -> None:
    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(100):
        cursor["a"] = {}
        cursor = cursor["a"]
    async with http_client(mcp_url(server), "alice") as client:
        wrong_type = await client.call_tool("mcp__time__get_current_time", {"timezone": 5})
        nested = await client.call_tool("mcp__time__get_current_time",
                                        {"timezone": "UTC", "extra": deep})
        fine = await client.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
    assert wrong_type.is_error and "timezone: 5 is not of type 'string'" in text(wrong_type)
    assert nested.is_error and "invalid arguments" in text(nested)
    assert not fine.is_error
    rows = await audit_rows(api, tool="mcp__time__get_current_time")
    assert [(r["outcome"], r["blocked_by"]) for r in rows] == [
        ("blocked", "argument_validation"), ("blocked", "argument_validation"), ("ok", None)]


async def test_a_session_opened_by_one_user_refuses_another_users_token(
        looked_at_api: httpx.AsyncClient) -> None:
    api = looked_at_api
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "probe", "version": "1"}}}
    opened = await api.post("/mcp/coder", json=hello,
                            headers={**headers, "Authorization": "Bearer tok-alice-mcp"})
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    as_bob = await api.post("/mcp/coder", json=listing, headers={
        **headers, "Authorization": "Bearer tok-bob-mcp", "mcp-session-id": session,
        "mcp-protocol-version": "2025-06-18"})
    assert as_bob.status_code == 404
