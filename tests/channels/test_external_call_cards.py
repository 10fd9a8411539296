"""Cards for calls hookgate does not run itself: an MCP client's call through the gateway and
a Claude Code hook call. On Slack and Feishu they name the gate rule that matched and its
reason, show the description the downstream server gave, and offer only what can succeed:
approve and reject, never "approve with edited arguments" (the inbox and CLI agree)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from hookgate.channels.card_text import INBOX_LINK, INBOX_LINK_PLAIN
from hookgate.cli.main import app
from hookgate.runtime.channel_records import SECRETS_KEY_ENV, SecretsKey
from hookgate.runtime.deployment import ChannelSpec
from tests.fakes.feishu import FakeFeishu, buttons_of, card_text
from tests.fakes.slack import FakeSlack, block_texts
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.world import TOKENS, auth, eventually, http_client, make_world

#: The same agents twice, one per platform.
AGENTS = """agents:
  - {{id: mcp-{channel}, org: acme, owner: alice, model: idle,
     confirmation_approver_scope: org_members, mcp: {{servers: [git]}}}}
  - id: cc-{channel}
    org: acme
    owner: alice
    model: idle
    confirmation_approver_scope: org_members
    model_config_json:
      claude_code:
        wait_s: 0
        rules:
          - {{matcher: Bash, command: [[git, push]], requires_confirmation: true,
             reason: pushes publish commits to everyone}}
"""
GIT_RULE = ("gate rule mcp_servers[git].requires_confirmation[0] (matcher "
            "git_create_branch|git_commit|git_checkout): branches and commits change the "
            "shared repository")


def cc_rule(agent: str) -> str:
    return (f"gate rule claude_code.rules[0] of agent '{agent}' (matcher Bash, command git "
            "push): pushes publish commits to everyone")


class Platforms:
    def __init__(self, server: LiveServer, slack: FakeSlack, feishu: FakeFeishu,
                 repo: Path) -> None:
        self.server, self.slack, self.feishu, self.repo = server, slack, feishu, repo

    def card(self, channel: str, request_id: str) -> str:
        """All the text of the card of ``request_id`` on ``channel``, as JSON text."""
        if channel == "slack":
            found = [m.blocks for m in self.slack.messages.values()
                     if request_id in json.dumps(m.blocks)]
        else:
            found = [m.content for m in self.feishu.messages.values()
                     if request_id in json.dumps(m.content)]
        return json.dumps(found[0], ensure_ascii=False) if found else ""

    def texts(self, channel: str, request_id: str) -> str:
        if channel == "slack":
            blocks = next(m.blocks for m in self.slack.messages.values()
                          if request_id in json.dumps(m.blocks))
            return block_texts(blocks or [])
        content = next(m.content for m in self.feishu.messages.values()
                       if request_id in json.dumps(m.content))
        return card_text(content)

    def buttons(self, channel: str, request_id: str) -> list[str]:
        if channel == "slack":
            blocks = next(m.blocks for m in self.slack.messages.values()
                          if request_id in json.dumps(m.blocks))
            return [e["action_id"] for b in blocks or []
                    if b["type"] == "actions" for e in b["elements"]]
        content = next(m.content for m in self.feishu.messages.values()
                       if request_id in json.dumps(m.content))
        return [str(b["behaviors"][0]["value"]["decision"]) for b in buttons_of(content)]


@pytest.fixture(scope="module")
def platforms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platforms]:
    root = tmp_path_factory.mktemp("cards")
    world = make_world(root, f"sqlite+aiosqlite:///{root / 'hookgate.db'}")
    config = world.config_path.read_text()
    extra = AGENTS.format(channel="slack") + AGENTS.format(channel="feishu")[len("agents:\n"):]
    world.config_path.write_text(config.replace("agents:\n", extra, 1))
    with pytest.MonkeyPatch.context() as mp, FakeSlack() as slack, FakeFeishu() as feishu:
        mp.setenv(SECRETS_KEY_ENV, SecretsKey.generate())
        deployment = world.deployment()
        deployment.channels = [
            ChannelSpec("ops-slack", "slack", "acme", slack.channel_config()),
            ChannelSpec("ops-feishu", "feishu", "acme", feishu.channel_config())]
        for agent in deployment.agents.values():
            if agent.id.endswith(("-slack", "-feishu")):
                agent.approval_channel_id = "ops-" + agent.id.split("-")[1]
        with live_server(deployment) as srv:
            yield Platforms(srv, slack, feishu, world.repo)


def pending_of(server: LiveServer, agent: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{server.url}/api/confirmations", params={"status": "pending"},
                  headers=auth("bob"))
    assert r.status_code == 200, r.text
    return [c for c in r.json() if c["agent_id"] == agent]


@pytest.mark.parametrize("channel", ["slack", "feishu"])
async def test_an_mcp_card_names_the_gate_rule_and_the_downstream_description(
        platforms: Platforms, channel: str) -> None:
    server = platforms.server
    async with http_client(f"{server.url}/mcp/mcp-{channel}", "alice") as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        described = listed["mcp__git__git_create_branch"].description or ""
        call = asyncio.create_task(client.call_tool(
            "mcp__git__git_create_branch",
            {"repo_path": str(platforms.repo), "branch_name": f"to-{channel}"}))
        [request] = await eventually(lambda: pending_of(server, f"mcp-{channel}"),
                                     "the gated MCP call's request")
        await eventually(lambda: platforms.card(channel, request["id"]), "its card")
        call.cancel()
    text = platforms.texts(channel, request["id"])
    assert f"Why approval is needed: {GIT_RULE}" in text
    assert described and f"What the tool does: {described[:60]}" in text
    assert "flagged this call" not in text
    assert platforms.buttons(channel, request["id"]) == ["approve", "reject"]
    card = platforms.card(channel, request["id"])
    assert INBOX_LINK not in card and INBOX_LINK_PLAIN in card
    assert request["can_approve"] and not request["can_edit"]


@pytest.mark.parametrize("channel", ["slack", "feishu"])
def test_a_claude_code_card_names_the_rule_and_offers_no_edit(
        platforms: Platforms, channel: str) -> None:
    server, agent = platforms.server, f"cc-{channel}"
    body = {"hook_event_name": "PreToolUse", "session_id": f"s-{channel}", "cwd": "/w",
            "permission_mode": "default", "tool_name": "Bash",
            "tool_input": {"command": "git push origin main"}, "tool_use_id": "toolu_1",
            "transcript_path": "/tmp/t.jsonl"}
    r = httpx.post(f"{server.url}/api/claude-code/hooks", params={"agent": agent},
                   headers=auth("alice"), json=body, timeout=30)
    assert r.json()["hookSpecificOutput"]["permissionDecision"] == "deny", r.text
    [request] = pending_of(server, agent)
    text = platforms.texts(channel, request["id"])
    assert f"Why approval is needed: {cc_rule(agent)}" in text
    assert "What the tool does" not in text and "flagged this call" not in text
    assert platforms.buttons(channel, request["id"]) == ["approve", "reject"]
    card = platforms.card(channel, request["id"])
    assert INBOX_LINK not in card and INBOX_LINK_PLAIN in card

    # The inbox hides the edit, and the CLI says so before asking the server for it.
    assert request["can_approve"] and not request["can_edit"]
    cli = ["approvals", "--url", server.url, "--token", TOKENS["bob"]]
    listed = CliRunner().invoke(app, [*cli[:1], "list", *cli[1:]])
    assert "you may: approve, reject" in listed.output, listed.output
    shown = CliRunner().invoke(app, [*cli[:1], "show", request["id"], *cli[1:]])
    assert re.search(r"you may\s+approve, reject\n", shown.output), shown.output
    edited = CliRunner().invoke(app, [*cli[:1], "approve", request["id"], *cli[1:],
                                      "--set", "command=ls"])
    assert edited.exit_code == 2 and "cannot be edited" in edited.output, edited.output
    assert [r["id"] for r in pending_of(server, agent)] == [request["id"]]
