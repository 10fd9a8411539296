"""The ``requires_confirmation`` rules of an outside agent (``guarded_calls.rules``) and of an
MCP server are read before the call's provenance is traced: a rule whose ``when`` names
provenance applies to every call it matches (fail closed), so a send to an address only an
untrusted result named is never waved through by it (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.client import Client, Pending
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import TOKENS, McpWorld, http_client, make_world, text
from tests.provenance.test_paths import ALICE, ATTACKER, BOT, read_inbox

RULE = '"to" in provenance.untrusted_args'


def deployment(url: str) -> Deployment:
    agent = Agent(id="mailer", name="mailer", instructions="", tools=[], org_id="acme",
                  owner_user_id="alice", confirmation_approver_scope="agent_owner",
                  model_config_json={
                      "hooks": {"untrusted_output": ["read_inbox"]},
                      "guarded_calls": {"rules": [
                          {"matcher": "read_inbox", "writes": False},
                          {"matcher": "send_email", "when": RULE,
                           "requires_confirmation": True}]}})
    return Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(ALICE)),
               UserSpec("bot", "acme", token_sha256=token_digest(BOT))],
        agents={"mailer": agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[])


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    with live_server(deployment(database_url)) as srv:
        yield srv


@pytest.mark.both_databases
def test_an_outside_agents_rule_over_provenance_asks_rather_than_waves_through(
        server: LiveServer) -> None:
    with Client(server.url, BOT, framework="langgraph") as guard:
        guard.start_session(agent="mailer", session_id="s", request="Summarise my inbox")
        read_inbox(guard, "s", "r1")
        sent = guard.before_call(agent="mailer", session_id="s", call_id="w1",
                                 tool="send_email", arguments={"to": ATTACKER})
        assert isinstance(sent, Pending)


MAIL_SERVER = Path(__file__).with_name("mail_server.py")


@pytest.fixture
def mail(tmp_path: Path, database_url: str) -> Iterator[tuple[McpWorld, LiveServer]]:
    world = make_world(tmp_path, database_url)
    config = world.config_path.read_text().replace("mcp_servers:\n", f"""mcp_servers:
  - id: mail
    command: {sys.executable}
    args: [{MAIL_SERVER}]
    untrusted_output: true
    requires_confirmation:
      - {{matcher: forward_file, when: 'provenance.untrusted'}}
""", 1).replace("agents:\n", """agents:
  - id: plain
    org: acme
    owner: alice
    model: idle
    confirmation_approver_scope: org_members
    mcp: {servers: [mail]}
""", 1)
    world.config_path.write_text(config)
    with live_server(world.deployment()) as srv:
        yield world, srv


@pytest.mark.both_databases
async def test_an_mcp_servers_rule_over_provenance_asks_rather_than_waves_through(
        mail: tuple[McpWorld, LiveServer]) -> None:
    _world, server = mail
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    async with http_client(f"{server.url}/mcp/plain", "alice") as client:
        assert "evil-mail.test" in text(await client.call_tool("mcp__mail__read_inbox", {}))
        sent = asyncio.create_task(client.call_tool(
            "mcp__mail__forward_file", {"file": "q3-report.pdf", "to": ATTACKER}))
        async with httpx.AsyncClient() as http:
            for _ in range(500):
                pending = (await http.get(f"{server.url}/api/confirmations",
                                          params={"status": "pending"},
                                          headers=headers)).json()
                if pending or sent.done():
                    break
                await asyncio.sleep(0.02)
            assert not sent.done() and len(pending) == 1, (sent.done() and sent.result())
            await http.post(f"{server.url}/api/confirmations/{pending[0]['id']}/respond",
                            json={"decision": "reject", "reason": "no"}, headers=headers)
        assert (await asyncio.wait_for(sent, 30)).is_error
