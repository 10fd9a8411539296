"""MCP servers' gate rules in shadow mode: a real server with the MCP gateway in front of
``mcp-server-git`` (tests/mcp_gateway/world.py), driven by the official ``mcp`` client. A
gate rule (``mcp_servers[].requires_confirmation``) with ``mode: shadow`` never makes its tool
ask (the call runs) and its would-ask lands in the audit row's detail; the same rule enforcing
asks; a bad ``mode`` is refused at load naming the entry (hookgate.external.policy.CallRules
decides, for the MCP gateway as for the other gate rules). The mode is read when the call is
made: `hookgate policy reload --config` switches a running `hookgate serve`'s MCP gate rules
and the gateway's hook chain (a declared hook) with no restart, and back."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from hookgate.config import ConfigError, load_config
from hookgate.config.mcp_servers import McpServerSpec
from hookgate.mcp.downstream import DownstreamServer
from hookgate.mcp.mapping import McpTool, gateway_tool
from tests.instances import Instance
from tests.live_server import live_server
from tests.mcp_gateway.world import (
    audit_rows,
    decide,
    http_client,
    make_world,
    one_pending,
    pending_requests,
    stdio_params,
    text,
)

pytestmark = pytest.mark.both_databases

#: The servers of the coder whose gateway a test starts: git's tools are the only ones called
#: (a time server would be one more process started for nothing).
GIT_ONLY = ["git"]

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

    world = make_world(tmp_path, database_url, coder_servers=GIT_ONLY)
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
    assert not other.needs_confirmation({"amount": 60})


ROOT = Path(__file__).resolve().parents[2]
#: A declared hook of the gateway's agent, in shadow mode beside the gate rule: it would
#: refuse every ``git_status``.
NO_STATUS = ("        command_hooks:\n"
             "          - {event: PreToolUse, matcher: mcp__git__git_status, name: no-status,\n"
             "             mode: shadow, command: \"echo status is off >&2; exit 2\"}\n")
CLASS_HOOKS = "        class_hooks:\n          - audit_log\n"


def _reload(config: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "policy", "reload", "--config",
         str(config)], capture_output=True, text=True, timeout=120, cwd=config.parent,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "modes" in done.stdout, done.stdout


def _switched(config: Path, old: str, new: str) -> None:
    said = config.read_text(encoding="utf-8")
    assert said.count(f"mode: {old}") == 2, said
    config.write_text(said.replace(f"mode: {old}", f"mode: {new}"), encoding="utf-8")


async def _taken(server: Instance, client: Any, repo: Path, times: int) -> None:
    # Calls read the modes (each a look at the stamp when the last is a second old) until
    # the server has logged taking the ``times``-th stamp.
    deadline = time.monotonic() + 60
    while server.log.read_text(encoding="utf-8", errors="replace").count(
            "modes reloaded") < times:
        assert time.monotonic() < deadline, server.log.read_text()[-3000:]
        done = await client.call_tool("mcp__git__git_log", {"repo_path": str(repo),
                                                            "max_count": 1})
        assert not done.is_error, text(done)
        await asyncio.sleep(0.3)


async def _asked_or_ran(api: Any, call: asyncio.Task[types.CallToolResult]
                        ) -> dict[str, Any] | types.CallToolResult:
    # The call's first sign: a request in the inbox (it asks), else its result (it ran).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = await pending_requests(api)
        if found:
            return dict(found[0])
        if call.done():
            return call.result()
        await asyncio.sleep(0.1)
    raise AssertionError("the call neither asked nor finished")


@pytest.mark.timeout(400)
async def test_a_reload_switches_a_running_gateways_mcp_gate_rule_and_back(
        tmp_path: Path, database_url: str) -> None:
    import httpx

    world = make_world(tmp_path, database_url, coder_servers=GIT_ONLY)
    _with_mode(world.config_path, "shadow")
    said = world.config_path.read_text(encoding="utf-8")
    assert said.count(CLASS_HOOKS) == 1
    world.config_path.write_text(said.replace(CLASS_HOOKS, NO_STATUS + CLASS_HOOKS),
                                 encoding="utf-8")
    repo = {"repo_path": str(world.repo)}
    server = Instance("gateway", world.config_path, tmp_path)
    try:
        server.spawn()
        server.wait_up()
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
            async with http_client(f"{server.url}/mcp/coder", "alice") as client:
                # Shadow: the rule's tool runs unasked, the hook refuses nothing.
                ran = await client.call_tool("mcp__git__git_create_branch",
                                             {**repo, "branch_name": "shadow-1"})
                assert not ran.is_error, text(ran)
                status = await client.call_tool("mcp__git__git_status", repo)
                assert not status.is_error, text(status)

                # Enforce, by a reload: the SAME server's next call asks a person.
                _switched(world.config_path, "shadow", "enforce")
                await asyncio.to_thread(_reload, world.config_path)
                await _taken(server, client, world.repo, 1)
                status = await client.call_tool("mcp__git__git_status", repo)
                assert status.is_error and "status is off" in text(status), text(status)
                call = asyncio.create_task(client.call_tool(
                    "mcp__git__git_create_branch", {**repo, "branch_name": "enforced"}))
                first = await _asked_or_ran(api, call)
                assert isinstance(first, dict), f"it ran unasked: {text(first)}"
                assert "branches and commits change the shared repository" in str(first)
                assert "shadow-1" in world.branches() and "enforced" not in world.branches()
                await decide(api, first["id"], "reject")
                assert (await asyncio.wait_for(call, 60)).is_error
                assert "enforced" not in world.branches()

                # And back to shadow: runs unasked again, recorded as would-ask.
                _switched(world.config_path, "enforce", "shadow")
                await asyncio.to_thread(_reload, world.config_path)
                await _taken(server, client, world.repo, 2)
                status = await client.call_tool("mcp__git__git_status", repo)
                assert not status.is_error, text(status)
                call = asyncio.create_task(client.call_tool(
                    "mcp__git__git_create_branch", {**repo, "branch_name": "shadow-2"}))
                first = await _asked_or_ran(api, call)
                assert isinstance(first, types.CallToolResult), f"it asked: {first}"
                assert not first.is_error, text(first)
                assert await pending_requests(api) == []
            assert "shadow-2" in world.branches()
            rows = await audit_rows(api, tool="mcp__git__git_create_branch")
            assert [r["outcome"] == "ok" for r in rows] == [True, False, True], rows
            assert WOULD_ASK in (rows[0]["detail"] or "") and WOULD_ASK in (
                rows[2]["detail"] or ""), rows
            assert "shadow" not in (rows[1]["detail"] or ""), rows
    finally:
        server.stop()


@pytest.mark.timeout(300)
async def test_a_reload_switches_the_in_process_stdio_gateways_mcp_gate_rule(
        tmp_path: Path, database_url: str) -> None:
    # `hookgate mcp stdio --in-process` reads the configuration itself: a reload reaches it
    # as it reaches `hookgate serve`, with no restart of the client's gateway process.
    import httpx
    from mcp import Client

    world = make_world(tmp_path, database_url, coder_servers=GIT_ONLY)
    _with_mode(world.config_path, "shadow")
    repo = {"repo_path": str(world.repo)}
    with live_server(world.deployment()) as srv:  # the inbox, on the same database
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as api, \
                Client(stdio_params(world, "coder", "alice")) as client:
            ran = await client.call_tool("mcp__git__git_create_branch",
                                         {**repo, "branch_name": "shadow-1"})
            assert not ran.is_error, text(ran)
            said = world.config_path.read_text(encoding="utf-8")
            world.config_path.write_text(said.replace("mode: shadow", "mode: enforce"),
                                         encoding="utf-8")
            await asyncio.to_thread(_reload, world.config_path)
            # Calls until one asks: the process takes the stamp within about a second.
            deadline = time.monotonic() + 60
            tries = 0
            while True:
                tries += 1
                call = asyncio.create_task(client.call_tool(
                    "mcp__git__git_create_branch", {**repo, "branch_name": f"try-{tries}"}))
                first = await _asked_or_ran(api, call)
                if isinstance(first, dict):
                    break
                assert time.monotonic() < deadline, "the reload never reached the gateway"
                await asyncio.sleep(0.3)
            assert "branches and commits change the shared repository" in str(first)
            await decide(api, first["id"], "reject")
            assert (await asyncio.wait_for(call, 60)).is_error
    assert f"try-{tries}" not in world.branches()


def test_a_server_wide_requires_confirmation_asks_for_every_tool() -> None:
    # ``requires_confirmation: true`` on the server: every call of every tool asks.
    spec = McpServerSpec.model_validate({"id": "pay", "command": "x",
                                         "requires_confirmation": True})
    tool = gateway_tool(DownstreamServer(spec), types.Tool(name="send", input_schema={
        "type": "object"}), "coder", "acme")
    assert isinstance(tool, McpTool) and tool.needs_confirmation({})
    assert "every call needs a person" in (tool.for_call({}).confirmation_reason or "")


def test_an_unreadable_modes_stamp_keeps_the_modes_in_force(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    # A stamp that cannot be read (nested too deep to decode: RecursionError from the JSON
    # reader, like any other unreadable stamp) changes no mode: the modes in force stay, the
    # status says the reload failed, and the call is decided as before, on every look.
    from hookgate.policies import modes

    spec = McpServerSpec.model_validate({"id": "pay", "command": "x", "requires_confirmation": [
        {"matcher": "send", "reason": "payments", "mode": "shadow"}]})
    config = tmp_path / "hookgate.yaml"
    live = modes.ModesInForce(config, modes.catalogue({"mcp_servers[pay]": spec}, {}),
                              recheck_s=0.0)
    monkeypatch.setattr(modes, "_IN_FORCE", live)
    tool = gateway_tool(DownstreamServer(spec), types.Tool(name="send", input_schema={
        "type": "object"}), "coder", "acme")
    assert isinstance(tool, McpTool) and tool.shadow_for is not None
    assert not tool.needs_confirmation({})  # shadow, as started
    modes.modes_stamp_path(config).write_text("[" * 100_000, encoding="utf-8")
    live._seen = ""  # the next look reads the stamp
    assert not tool.needs_confirmation({})
    status = live.status()
    assert status["state"] == "reload failed" and "cannot be read" in status["error"], status
    live._seen = ""
    assert ["would ask" in d.note() for d in tool.shadow_for({})] == [True]
