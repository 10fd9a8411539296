"""Downstream servers that do not start, crash, hang or answer nonsense: every such call fails
closed with a message naming the server and what happened, and a crashed server comes back
on the next call or when an admin restarts it. Resources and prompts pass through read-only."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from mcp import MCPError

from hookgate.config import load_config
from hookgate.runtime.deployment import deployment_from_config
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import TOKENS, audit_rows, auth, http_client, outcome, text

FLAKY = Path(__file__).with_name("flaky_server.py")

CONFIG = """\
database: {database}
orgs: [{{id: acme}}]
users:
  - {{id: alice, org: acme, admin: true, token: {alice}}}
  - {{id: bob, org: acme, token: {bob}}}
models: {{idle: {{type: scripted, turns: [{{answer: idle}}]}}}}
mcp_servers:
  - id: flaky
    command: {python}
    args: [{flaky}]
    env: {{FLAKY_LOG: "{log}"}}
    timeout_s: 1.5
  - id: silent
    command: {python}
    args: [{flaky}]
    env: {{FLAKY_MODE: silent, FLAKY_LOG: "{log}"}}
    startup_timeout_s: 1
  - id: missing
    command: /nonexistent/mcp-server
agents:
  - id: ops
    org: acme
    model: idle
    mcp: {{servers: [flaky, silent, missing], resources: true, prompts: true}}
    model_config_json: {{hooks: {{class_hooks: [audit_log]}}}}
  - id: narrow
    org: acme
    model: idle
    mcp: {{tools: [mcp__flaky__echo]}}
"""


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


@pytest.fixture
def server(tmp_path: Path, database_url: str, log_path: Path) -> Iterator[LiveServer]:
    path = tmp_path / "hookgate.yaml"
    path.write_text(CONFIG.format(database=database_url, python=sys.executable, flaky=FLAKY,
                                  log=log_path, **TOKENS))
    with live_server(deployment_from_config(load_config(path))) as srv:
        yield srv


@pytest.fixture
async def api(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        yield client


def downstream_calls(log_path: Path) -> list[str]:
    if not log_path.exists():
        return []
    return [json.loads(line)["name"] for line in log_path.read_text().splitlines()]


async def test_servers_that_cannot_start_fail_closed_with_the_reason(
        server: LiveServer, api: httpx.AsyncClient) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        missing = await client.call_tool("mcp__missing__anything", {})
        silent = await client.call_tool("mcp__silent__echo", {"text": "hi"})
    assert names == ["mcp__flaky__crash", "mcp__flaky__echo", "mcp__flaky__fails",
                     "mcp__flaky__garbled", "mcp__flaky__nap"]
    assert missing.is_error and "MCP server 'missing' is not available" in text(missing)
    assert "command not found" in text(missing)
    assert silent.is_error and "MCP server 'silent'" in text(silent)
    assert "did not complete its start within 1s" in text(silent)
    rows = await audit_rows(api)
    assert [(r["tool_name"], r["outcome"]) for r in rows] == [
        ("mcp__missing__anything", "blocked"), ("mcp__silent__echo", "blocked")]


async def test_a_crash_fails_the_call_and_the_next_call_starts_the_server_again(
        server: LiveServer, api: httpx.AsyncClient, log_path: Path) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        crashed = await client.call_tool("mcp__flaky__crash", {})
        after = await client.call_tool("mcp__flaky__echo", {"text": "back"})
    assert crashed.is_error and outcome(crashed)["status"] == "error"
    assert "MCP server 'flaky' closed the connection" in text(crashed)
    assert "not retried" in text(crashed)
    assert not after.is_error and text(after) == "back"
    assert downstream_calls(log_path) == ["crash", "echo"]  # the crash was not retried
    servers = (await api.get("/api/mcp/servers", headers=auth("alice"))).json()
    assert {s["id"]: s["starts"] for s in servers}["flaky"] == 2
    rows = await audit_rows(api)
    assert [r["outcome"] for r in rows] == ["error", "ok"]


async def test_a_downstream_timeout_a_malformed_result_and_a_tool_error_fail_closed(
        server: LiveServer, api: httpx.AsyncClient) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        garbled = await client.call_tool("mcp__flaky__garbled", {})
        failed = await client.call_tool("mcp__flaky__fails", {})
        slow = await client.call_tool("mcp__flaky__nap", {"seconds": 5})
    assert slow.is_error and "did not answer tools/call within 1.5s" in text(slow)
    assert "outcome is unknown" in text(slow)
    assert garbled.is_error and "malformed tools/call result" in text(garbled)
    assert failed.is_error and "disk full" in text(failed)
    rows = await audit_rows(api)
    assert [r["outcome"] for r in rows] == ["error", "error", "error"]


async def test_an_admin_restarts_a_downstream_server_on_demand(
        server: LiveServer, api: httpx.AsyncClient) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        assert not (await client.call_tool("mcp__flaky__echo", {"text": "1"})).is_error
    refused = await api.post("/api/mcp/servers/flaky/restart", headers=auth("bob"))
    assert refused.status_code == 403
    r = await api.post("/api/mcp/servers/flaky/restart", headers=auth("alice"))
    assert r.status_code == 200, r.text
    assert r.json()["starts"] == 2 and "echo" in r.json()["tools"]
    broken = await api.post("/api/mcp/servers/missing/restart", headers=auth("alice"))
    assert broken.status_code == 502 and "command not found" in broken.json()["detail"]
    unknown = await api.post("/api/mcp/servers/nope/restart", headers=auth("alice"))
    assert unknown.status_code == 404


async def test_resources_and_prompts_pass_through_only_where_the_agent_allows(
        server: LiveServer) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        resources = (await client.list_resources()).resources
        memo = await client.read_resource("memo://today")
        prompts = (await client.list_prompts()).prompts
        greeting = await client.get_prompt("mcp__flaky__greet", {"who": "Ada"})
    assert [str(r.uri) for r in resources] == ["memo://today"]
    assert memo.contents[0].text == "buy milk"  # type: ignore[union-attr]
    assert [p.name for p in prompts] == ["mcp__flaky__greet"]
    assert "Ada" in greeting.messages[0].content.text  # type: ignore[union-attr]

    async with http_client(f"{server.url}/mcp/narrow", "alice") as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["mcp__flaky__echo"]
        assert (await client.list_resources()).resources == []
        assert (await client.list_prompts()).prompts == []
        with pytest.raises(MCPError) as caught:
            await client.read_resource("memo://today")
    assert "may not read MCP resources" in caught.value.message
