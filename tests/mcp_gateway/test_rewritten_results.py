"""A tool with an ``outputSchema`` (``mcp-server-time``'s) whose result a PostToolUse hook
rewrote keeps its contract, over streamable HTTP and stdio, with the official ``mcp`` client:
a redaction that leaves the result valid comes back structured, one that breaks the schema,
a truncation and a withheld result come back as ``isError`` results. The client never raises
a protocol error, and never sees what the hooks removed."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from tests.adversarial_tally import TALLY
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.rewriting_hooks import REDACTED
from tests.mcp_gateway.world import McpWorld, http_client, outcome, sqlite_world, stdio_params

REWRITING_AGENTS = """\
  - id: cutter
    org: acme
    model: idle
    mcp: {servers: [time]}
    model_config_json: {hooks: {class_hooks: [{name: result_truncate, params: {max_chars: 200}}]}}
  - id: hide_time
    org: acme
    model: idle
    mcp: {servers: [time]}
    model_config_json:
      hooks: {class_hooks: [{name: "tests.mcp_gateway.rewriting_hooks:RedactKey",
                             params: {key: datetime}}]}
  - id: hide_dst
    org: acme
    model: idle
    mcp: {servers: [time]}
    model_config_json:
      hooks: {class_hooks: [{name: "tests.mcp_gateway.rewriting_hooks:RedactKey",
                             params: {key: is_dst}}]}
  - id: counter
    org: acme
    model: idle
    mcp: {servers: [time]}
    model_config_json:
      hooks: {class_hooks: [{name: "tests.mcp_gateway.rewriting_hooks:CountsItsCalls",
                             params: {key: timezone}}]}
  - id: withholder
    org: acme
    model: idle
    mcp: {servers: [time]}
    model_config_json:
      hooks: {class_hooks: [{name: "tests.hookfixtures:MisbehavingPost",
                             params: {how: raise}}]}
"""

#: What mcp-server-time answers that the hooks of these agents remove or cut.
RAW_DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
RAW_DST = re.compile(r'"is_dst"\s*:\s*(true|false)')
CALL = ("mcp__time__get_current_time", {"timezone": "Europe/Paris"})


# One world and one server for the module: each test opens its own session, on an agent whose
# hooks keep no state (no rate limit, no counter), and asserts only on what its own calls
# return, so a test finds the world as every other test leaves it. The time server starts
# once per module instead of once per test.
@pytest.fixture(scope="module")
def rewriting_world(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
                    ) -> McpWorld:
    world = sqlite_world(tmp_path_factory.mktemp("rewriting"), sqlite_template)
    world.config_path.write_text(world.config_path.read_text() + REWRITING_AGENTS)
    return world


@pytest.fixture(scope="module")
def rewriting_server(rewriting_world: McpWorld) -> Iterator[LiveServer]:
    with live_server(rewriting_world.deployment()) as srv:
        yield srv


@pytest.fixture
def served(transport: str, request: pytest.FixtureRequest) -> LiveServer | None:
    """The module's server for a test over HTTP; over stdio the gateway is the subprocess's
    own, and no server is started for it."""
    if transport != "http":
        return None
    server: LiveServer = request.getfixturevalue("rewriting_server")
    return server


@asynccontextmanager
async def client_of(transport: str, world: McpWorld, server: LiveServer | None,
                    agent: str) -> AsyncIterator[Client]:
    if transport == "http":
        assert server is not None
        async with http_client(f"{server.url}/mcp/{agent}", "alice") as client:
            yield client
    else:
        async with Client(stdio_params(world, agent, "alice")) as client:
            yield client


def everything_shown(result: types.CallToolResult) -> str:
    return json.dumps(result.model_dump(mode="json", by_alias=True))


TRANSPORTS = ["http", "stdio"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_redaction_that_keeps_the_schema_comes_back_structured_and_redacted(
        transport: str, rewriting_world: McpWorld, served: LiveServer | None) -> None:
    async with client_of(transport, rewriting_world, served, "hide_time") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed[CALL[0]].output_schema is not None  # the contract under test
        result = await client.call_tool(*CALL)  # validated by the client: no raise
    assert not result.is_error, everything_shown(result)
    assert result.structured_content is not None
    assert result.structured_content["datetime"] == REDACTED
    assert result.structured_content["timezone"] == "Europe/Paris"
    leaked = RAW_DATETIME.search(everything_shown(result)) is not None
    TALLY.record(f"raw datetime through a redacting hook ({transport})", leaked)
    assert not leaked


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("agent", "removed", "why"), [
    ("cutter", None, "carries no structured content"),
    ("hide_dst", RAW_DST, "does not match the tool's output schema"),
    ("withholder", RAW_DATETIME, None),
])
async def test_a_rewritten_result_that_breaks_the_schema_is_an_error_result_saying_why(
        transport: str, agent: str, removed: re.Pattern[str] | None, why: str | None,
        rewriting_world: McpWorld, served: LiveServer | None) -> None:
    async with client_of(transport, rewriting_world, served, agent) as client:
        result = await client.call_tool(*CALL)  # no "did not return structured content"
        # The session is still good: the client raised nothing and can go on.
        again = await client.call_tool(*CALL)
    shown = everything_shown(result)
    assert result.is_error and again.is_error, shown
    assert result.structured_content is None
    text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
    if why is not None:
        assert outcome(result)["status"] == "ok"  # the tool ran; its result was rewritten
        assert why in text and "error result" in text
    else:
        assert outcome(result)["status"] == "withheld"
    if agent == "cutter":
        assert "observation cut from" in text or "characters" in text
        assert len(text) < 600  # the cut text and the note, not the whole result
    leaked = removed is not None and removed.search(shown) is not None
    TALLY.record(f"{agent}: removed content through an outputSchema tool ({transport})",
                 leaked)
    assert not leaked


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_third_partys_hook_is_made_for_each_call_of_the_gateway(
        transport: str, rewriting_world: McpWorld, served: LiveServer | None) -> None:
    """As on every other path (docs/guides/declaring-hooks.md): a hook that is not one of
    hookgate's own stateless ones never serves a second call, in one session or across two,
    so what it kept from one call cannot reach another."""
    seen = []
    for _session in range(2):
        async with client_of(transport, rewriting_world, served, "counter") as client:
            for _call in range(2):
                result = await client.call_tool(*CALL)
                assert not result.is_error, everything_shown(result)
                assert result.structured_content is not None
                seen.append(result.structured_content["timezone"])
    assert seen == ["seen 1"] * 4
