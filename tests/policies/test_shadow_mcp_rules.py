"""MCP servers' gate rules in shadow mode: a real server with the MCP gateway in front of
``mcp-server-git`` (tests/mcp_gateway/world.py), driven by the official ``mcp`` client. A
gate rule (``mcp_servers[].requires_confirmation``) with ``mode: shadow`` never makes its tool
ask (the call runs) and its would-ask lands in the audit row's detail; the same rule enforcing
asks; a bad ``mode`` is refused at load naming the entry (hookgate.external.policy.CallRules
decides, for the MCP gateway as for the other gate rules)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import mcp_types as types
import pytest

from hookgate.config import ConfigError, load_config
from hookgate.config.mcp_servers import McpServerSpec
from hookgate.mcp.downstream import DownstreamServer
from hookgate.mcp.mapping import McpTool, gateway_tool
from tests.live_server import live_server
from tests.mcp_gateway.world import (
    audit_rows,
    decide,
    http_client,
    make_world,
    one_pending,
    pending_requests,
    text,
)

pytestmark = pytest.mark.both_databases

RULE = "        reason: branches and commits change the shared repository\n"
WOULD_ASK = ("shadow rule mcp_servers[git].requires_confirmation[0]: would ask "
             "(branches and commits change the shared repository)")


def _with_mode(config: Path, mode: str) -> None:
    said = config.read_text(encoding="utf-8")
    assert RULE in said
    config.write_text(said.replace(RULE, f"{RULE}        mode: {mode}\n"), encoding="utf-8")


@pytest.mark.parametrize("mode", ["shadow", "enforce"])
async def test_a_shadow_mcp_gate_rule_never_asks_and_its_would_ask_is_audited(
        tmp_path: Path, database_url: str, mode: str) -> None:
    import httpx

    world = make_world(tmp_path, database_url)
    _with_mode(world.config_path, mode)
    args = {"repo_path": str(world.repo), "branch_name": "feature-s"}
    with live_server(world.deployment()) as srv:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as api:
            async with http_client(f"{srv.url}/mcp/coder", "alice") as client:
                call = asyncio.create_task(client.call_tool("mcp__git__git_create_branch",
                                                            args))
                if mode == "enforce":
                    # The same rule enforcing asks a person, with its words.
                    request = await one_pending(api)
                    assert world.branches() == ["main"]
                    assert "branches and commits change the shared repository" in str(
                        request), request
                    await decide(api, request["id"], "reject")
                    assert (await asyncio.wait_for(call, 30)).is_error
                    return
                result = await asyncio.wait_for(call, 30)
                assert not result.is_error, text(result)
                assert await pending_requests(api) == []
                # A rule the shadow one does not name still enforces (git_log over 50).
                status = await client.call_tool("mcp__git__git_status",
                                                 {"repo_path": str(world.repo)})
                assert not status.is_error, text(status)
            assert world.branches() == ["feature-s", "main"]
            [row] = await audit_rows(api, tool="mcp__git__git_create_branch")
            [plain] = await audit_rows(api, tool="mcp__git__git_status")
    assert row["outcome"] == "ok", row
    assert WOULD_ASK in (row["detail"] or ""), row
    assert "shadow" not in (plain["detail"] or ""), plain


def test_a_bad_mode_on_an_mcp_gate_rule_is_refused_at_load(tmp_path: Path,
                                                             database_url: str) -> None:
    world = make_world(tmp_path, database_url)
    _with_mode(world.config_path, "observe")
    with pytest.raises(ConfigError) as raised:
        load_config(world.config_path)
    said = str(raised.value)
    assert "mcp_servers[git].requires_confirmation[0]: 'mode' must be 'enforce' or " \
           "'shadow', got 'observe'" in said, said
    done = subprocess.run([sys.executable, "-m", "hookgate.cli.main", "check", "--config",
                           str(world.config_path)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "mcp_servers[git].requires_confirmation[0]: 'mode' must be 'enforce' or " \
           "'shadow', got 'observe'" in done.stderr, done.stderr


def test_a_shadow_rule_beside_an_enforcing_one_is_recorded_on_a_gated_call_too() -> None:
    # One tool, two rules: the enforcing one asks over 50, the shadow one would ask over 10.
    spec = McpServerSpec.model_validate({"id": "pay", "command": "x", "requires_confirmation": [
        {"matcher": "send", "when": "args.amount > 50", "reason": "big"},
        {"matcher": "send", "when": "args.amount > 10", "reason": "medium", "mode": "shadow"},
        {"matcher": "other", "mode": "shadow"}]})
    schema = {"type": "object", "properties": {"amount": {"type": "number"}}}
    tool = gateway_tool(DownstreamServer(spec), types.Tool(name="send", input_schema=schema),
                        "coder", "acme")
    assert isinstance(tool, McpTool) and tool.shadow_for is not None
    assert not tool.needs_confirmation({"amount": 20}) and tool.needs_confirmation({"amount": 60})
    for amount, asks in ((5, False), (20, False), (60, True)):
        called = tool.for_call({"amount": amount})
        assert isinstance(called, McpTool) and called.shadow_for is not None
        said = [d.note() for d in called.shadow_for({"amount": amount})]
        assert said == ([] if amount < 10 else [
            "shadow rule mcp_servers[pay].requires_confirmation[1]: would ask (medium)"])
        assert ("big" in (called.confirmation_reason or "")) is asks
        assert "medium" not in (called.confirmation_reason or "")
    # Only shadow rules name a tool: it never asks.
    other = gateway_tool(DownstreamServer(spec), types.Tool(name="other", input_schema=schema),
                         "coder", "acme")
    assert other.requires_confirmation is False
