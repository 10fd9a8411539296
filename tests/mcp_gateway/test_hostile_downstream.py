"""A downstream server that answers with hostile bytes on its stdout (hookgate.mcp.
downstream_stdio reads them): a message cut into pieces (a character split in two), bytes
that are not UTF-8, NaN, a lone surrogate, JSON nested past any parser's depth, answers to
ids nobody asked or asked once or not yet, a huge answer. Each call gets the downstream's answer or
fails closed with a message naming the server; no stale answer is ever taken for a later
call, and the gateway goes on serving (a connection the server broke is started again)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookgate.config import load_config
from hookgate.runtime.deployment import deployment_from_config
from tests.adversarial_tally import TALLY
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.hostile_server import SPLIT_TEXT
from tests.mcp_gateway.world import TOKENS, http_client, outcome, text

HOSTILE = Path(__file__).with_name("hostile_server.py")
HUGE_BYTES = 3_000_000

CONFIG = """\
database: {database}
orgs: [{{id: acme}}]
users:
  - {{id: alice, org: acme, token: {alice}}}
models: {{idle: {{type: scripted, turns: [{{answer: idle}}]}}}}
mcp_servers:
  - id: hostile
    command: {python}
    args: [{hostile}]
    env: {{HOSTILE_HUGE_BYTES: "{huge}"}}
    timeout_s: 2
agents:
  - {{id: ops, org: acme, model: idle, mcp: {{servers: [hostile]}}}}
"""


@pytest.fixture
def server(tmp_path: Path, database_url: str) -> Iterator[LiveServer]:
    path = tmp_path / "hookgate.yaml"
    path.write_text(CONFIG.format(database=database_url, python=sys.executable,
                                  hostile=HOSTILE, huge=HUGE_BYTES, alice=TOKENS["alice"]))
    with live_server(deployment_from_config(load_config(path))) as srv:
        yield srv


async def test_an_answer_cut_into_pieces_arrives_whole(server: LiveServer) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        split = await client.call_tool("mcp__hostile__split", {})
        again = await client.call_tool("mcp__hostile__split", {})
    assert not split.is_error and text(split) == SPLIT_TEXT
    assert not again.is_error and text(again) == SPLIT_TEXT


@pytest.mark.parametrize("tool", ["not_utf8", "nan", "surrogate", "deep"])
async def test_a_hostile_answer_fails_closed_and_the_next_call_is_served(
        server: LiveServer, tool: str) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        hostile = await client.call_tool(f"mcp__hostile__{tool}", {})
        after = await client.call_tool("mcp__hostile__echo", {"text": "still here"})
    served = not after.is_error and text(after) == "still here"
    TALLY.record(f"a downstream answer with {tool} stops the gateway's next call", not served)
    assert served
    if tool == "surrogate" and not hostile.is_error:
        # Taken as JSON text: the client gets the same escaped surrogate, nothing more.
        assert text(hostile) == "a\ud800b"
        return
    assert hostile.is_error and outcome(hostile)["status"] == "error"
    assert "MCP server 'hostile'" in text(hostile)


async def test_an_answer_that_breaks_its_output_schema_reaches_no_client_as_a_result(
        server: LiveServer) -> None:
    # Checked once, after the hooks, by the gateway's mapping (decision record 0029): the
    # client gets an error result saying so, never the structured content, and the server
    # goes on serving without a restart.
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        await client.list_tools()
        off = await client.call_tool("mcp__hostile__off_schema", {})
        after = await client.call_tool("mcp__hostile__echo", {"text": "still here"})
    taken = not off.is_error or off.structured_content is not None
    TALLY.record("a downstream result that breaks its output schema reached the client", taken)
    assert not taken
    assert "does not match the tool's output schema" in text(off)
    assert "many" in text(off)
    assert not after.is_error and text(after) == "still here"


async def test_answers_to_ids_nobody_asked_are_never_taken_for_a_later_call(
        server: LiveServer) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        reused = await client.call_tool("mcp__hostile__reused", {})
        later = [await client.call_tool("mcp__hostile__echo", {"text": f"call {n}"})
                 for n in range(3)]
    assert not reused.is_error and text(reused) == "first"
    mixed = [text(r) for r in later] != ["call 0", "call 1", "call 2"]
    TALLY.record("a downstream's stale answer was taken for a later MCP call", mixed)
    assert not mixed, [text(r) for r in later]


async def test_an_answer_to_the_next_request_sent_before_it_is_never_taken_for_it(
        server: LiveServer) -> None:
    # A tools/call is written straight onto the pipe under an id of its own (decision
    # record 0036): an answer to the id the next call will carry, sent before that call is
    # made, is an answer nobody asked, and the next call gets its own.
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        guessed = await client.call_tool("mcp__hostile__guessed", {})
        later = [await client.call_tool("mcp__hostile__echo", {"text": f"call {n}"})
                 for n in range(2)]
    assert not guessed.is_error and text(guessed) == "guessed"
    planted = [text(r) for r in later] != ["call 0", "call 1"]
    TALLY.record("a downstream's answer planted before the call was taken for it", planted)
    assert not planted, [text(r) for r in later]


async def test_a_call_that_times_out_is_cancelled_on_the_server_and_its_late_answer_dropped(
        server: LiveServer) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        slow = await client.call_tool("mcp__hostile__slow", {})
        seen = await client.call_tool("mcp__hostile__cancels", {})
        after = await client.call_tool("mcp__hostile__echo", {"text": "after"})
    assert slow.is_error and "did not answer tools/call within 2s" in text(slow), text(slow)
    ids = json.loads(text(seen))
    # The server heard that the call it was still running was abandoned (the courtesy
    # notifications/cancelled), for the id it was asked under: a tools/call's own.
    assert len(ids["slow"]) == 1 and ids["cancelled"] == ids["slow"], ids
    assert str(ids["slow"][0]).startswith("hookgate-")
    # Its late answer ("late") is taken for no later call.
    assert not after.is_error and text(after) == "after"


async def test_a_huge_answer_is_served_and_the_connection_goes_on(server: LiveServer) -> None:
    async with http_client(f"{server.url}/mcp/ops", "alice") as client:
        huge = await client.call_tool("mcp__hostile__huge", {})
        after = await client.call_tool("mcp__hostile__echo", {"text": "after"})
    assert outcome(huge)["status"] in ("ok", "truncated"), text(huge)[:300]
    assert not after.is_error and text(after) == "after"
