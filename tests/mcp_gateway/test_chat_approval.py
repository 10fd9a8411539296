"""A gated MCP call whose card goes to Slack (the fake Web API on loopback) and is approved by
a signed ``block_actions`` click: the call waiting in the MCP client then runs, once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from hookgate.runtime.deployment import ChannelSpec
from tests.fakes.slack import FakeSlack, block_texts
from tests.live_server import live_server
from tests.mcp_gateway.world import (
    audit_rows,
    eventually,
    http_client,
    make_world,
    outcome,
    text,
)


@pytest.fixture
def slack(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    monkeypatch.setenv(SECRETS_KEY_ENV, SecretsKey.generate())
    with FakeSlack() as fake:
        yield fake


async def test_a_signed_slack_click_approves_the_waiting_mcp_call(
        tmp_path: Path, database_url: str, slack: FakeSlack) -> None:
    world = make_world(tmp_path, database_url, coder_servers=["git"])  # the one it calls
    deployment = world.deployment()
    deployment.channels = [ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())]
    args = {"repo_path": str(world.repo), "branch_name": "from-slack"}
    with live_server(deployment) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as api, \
                http_client(f"{srv.url}/mcp/coder", "alice") as client:
            call = asyncio.create_task(client.call_tool("mcp__git__git_create_branch", args))
            message = await eventually(lambda: next(iter(slack.messages.values()), None),
                                       "the approval card in Slack")
            assert "mcp__git__git_create_branch" in block_texts(message.blocks or [])
            request_id = next(b["value"] for block in message.blocks or []
                              if block["type"] == "actions" for b in block["elements"])

            forged = slack.block_action(request_id, "approve", "U_BOB",
                                        message_ts=message.ts, signing_secret="wrong")
            assert (await forged.send(api, "/api/channels/ops-slack/callback")
                    ).status_code == 401
            await asyncio.sleep(0.3)
            assert not call.done() and world.branches() == ["main"]

            click = slack.block_action(request_id, "approve", "U_BOB", message_ts=message.ts)
            reply = await click.send(api, "/api/channels/ops-slack/callback")
            assert reply.status_code == 200, reply.text
            result = await asyncio.wait_for(call, 30)
            assert not result.is_error, text(result)
            assert outcome(result)["request_id"] == request_id
            record = (await api.get(f"/api/confirmations/{request_id}",
                                    headers={"Authorization": "Bearer tok-alice-mcp"})).json()
            assert record["decision"]["responded_by"] == "bob"
            assert record["decision"]["channel_identity"] == "slack:U_BOB"
            rows = await audit_rows(api, tool="mcp__git__git_create_branch")
    assert world.branches() == ["from-slack", "main"]
    assert [r["outcome"] for r in rows] == ["ok"]
    assert slack.violations == []
