"""Hostile ``when`` expressions on the two gates outside the agent's own rules (issue 26,
class 4): the MCP gateway's ``requires_confirmation`` rules under ``mcp_servers:`` and the
Claude Code policy rules under ``model_config_json.claude_code.rules``. One that could only
ever be stopped is refused when the configuration is loaded or checked, naming the key and
why; one made costly by the call's arguments is stopped when evaluated and the call needs a
person (fails closed), through the MCP gateway over HTTP and ``POST /api/claude-code/hooks``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate import Agent
from hookgate.claude_code.policy import ExternalPolicy, probe_context
from hookgate.config import ConfigError, parse_config
from hookgate.hooks.errors import HookBuildError
from tests.adversarial.test_expression_attempts import ARGS, AT_RUN_TIME, CONSTANT
from tests.adversarial_tally import Tally
from tests.claude_code.scene import coder
from tests.claude_code.test_hook_endpoint import decision, hook, pending, pre
from tests.live_server import LiveServer, live_server
from tests.mcp_gateway.test_mcp_config import listed, mapped
from tests.mcp_gateway.world import (
    decide,
    http_client,
    make_world,
    one_pending,
    outcome,
    pending_requests,
    text,
)

#: Small enough to evaluate (5**5 is 3125), and 3,900,000**3,900,000 never is.
BLOW_UP = "args.n ** args.n > 10**6"
HUGE_N = 3_900_000


def document(gate_when: str | None = None, claude_code_when: str | None = None
             ) -> dict[str, Any]:
    """A configuration with one MCP server gated by ``gate_when`` and a Claude Code agent
    whose one rule has ``claude_code_when``."""
    gate = [{"matcher": "charge*", **({"when": gate_when} if gate_when else {})}]
    rules = [{"matcher": "Bash", "requires_confirmation": True,
              **({"when": claude_code_when} if claude_code_when else {})}]
    return {
        "orgs": [{"id": "acme"}],
        "models": {"idle": {"type": "scripted", "turns": [{"answer": "x"}]}},
        "mcp_servers": [{"id": "pay", "command": "pay-server",
                         "requires_confirmation": gate}],
        "agents": [{"id": "coder", "org": "acme", "model": "idle",
                    "mcp": {"servers": ["pay"]},
                    "model_config_json": {"claude_code": {"rules": rules}}}],
    }


# -- refused when declared ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CONSTANT))
def test_an_mcp_gate_rule_whose_when_could_only_be_stopped_is_a_load_error(
        name: str, attempt: Tally) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(document(gate_when=CONSTANT[name]), env={})
    problem = str(refused.value)
    attempt.record(f"MCP gate rule when declared: {name}", False)
    assert "mcp_servers[0].requires_confirmation" in problem, problem
    assert "refused" in problem or "characters long" in problem or "nests deeper" in problem \
        or "parts" in problem, problem


@pytest.mark.parametrize("name", list(CONSTANT))
def test_a_claude_code_rule_whose_when_could_only_be_stopped_is_refused(
        name: str, attempt: Tally) -> None:
    agent = parse_config(document(claude_code_when=CONSTANT[name]), env={}).build_agent("coder")
    with pytest.raises(HookBuildError) as refused:
        ExternalPolicy.of(agent)
    problem = str(refused.value)
    attempt.record(f"Claude Code rule when declared: {name}", False)
    assert "agent 'coder': claude_code.rules[0]" in problem, problem
    assert "refused" in problem or "characters long" in problem or "nests deeper" in problem \
        or "parts" in problem, problem


def _check(tmp_path: Path, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "hookgate.yaml").write_text(json.dumps(doc))  # JSON is YAML
    return subprocess.run([sys.executable, "-m", "hookgate.cli.main", "check", "-c",
                           "hookgate.yaml"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)


def test_hookgate_check_refuses_either_gate_with_a_power_that_could_only_be_stopped(
        tmp_path: Path, attempt: Tally) -> None:
    power = CONSTANT["a 22-million-bit power"]
    for gate, doc in (("MCP gate rule", document(gate_when=power)),
                      ("Claude Code rule", document(claude_code_when=power))):
        done = _check(tmp_path, doc)
        attempt.record(f"hookgate check: {gate} with a 22-million-bit power",
                       done.returncode == 0)
        said = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 1, said
        assert "this power would exceed 4096 bits" in said, said
        where = "requires_confirmation" if gate.startswith("MCP") else "claude_code.rules[0]"
        assert where in said, said


# -- stopped when evaluated: the call needs a person -------------------------------------------


@pytest.mark.parametrize("name", list(AT_RUN_TIME))
def test_an_argument_driven_blow_up_gates_the_mcp_tool_and_the_claude_code_tool(
        name: str, attempt: Tally) -> None:
    spec = {"id": "pay", "command": "x",
            "requires_confirmation": [{"matcher": "charge*", "when": AT_RUN_TIME[name]}]}
    gated = mapped(spec, listed("charge_card", False)).needs_confirmation(dict(ARGS))
    attempt.record(f"MCP gate rule when at call time: {name}", not gated)
    assert gated

    agent = Agent(id="coder", name="coder", instructions="", tools=[], org_id="acme",
                  model_config_json={"claude_code": {"rules": [
                      {"matcher": "Bash", "when": AT_RUN_TIME[name],
                       "requires_confirmation": True}]}})
    args = {"command": "ls", **ARGS}
    tool = ExternalPolicy.of(agent).tool_for(
        "Bash", probe_context("Bash", args, agent, "alice", {"cwd": "/work/project"}))
    attempt.record(f"Claude Code rule when at call time: {name}",
                   tool.requires_confirmation is not True)
    assert tool.requires_confirmation is True


@pytest.mark.both_databases
def test_a_claude_code_call_whose_rule_is_stopped_is_denied_until_a_person_decides(
        database_url: str, attempt: Tally) -> None:
    deployment = coder(wait_s=0.3, rules=[{"matcher": "Bash", "when": BLOW_UP,
                                           "requires_confirmation": True}])
    deployment.database_url = database_url
    deployment.agents["coder"].confirmation_mode = "inline_only"
    deployment.agents["coder"].approval_channel_id = None
    with live_server(deployment) as srv:
        # The rule works: a small n is evaluated and does not match.
        small = hook(srv, pre("Bash", {"command": "ls", "n": 5}, "toolu_small"))
        assert decision(small) == (None, "")
        assert pending(srv) == []

        answer, why = decision(hook(srv, pre("Bash", {"command": "ls", "n": HUGE_N},
                                             "toolu_big")))
        attempt.record("Claude Code endpoint: args.n ** args.n with a huge n",
                       answer != "deny")
        [request] = pending(srv)
        assert answer == "deny" and request["id"] in why, why
        assert request["payload"]["args"]["n"] == HUGE_N

        # Every argument attack of the expression suite, one rule at a time.
        rules = srv.runtime.runs.agents["coder"].model_config_json["claude_code"]["rules"]
        for i, (name, when) in enumerate(AT_RUN_TIME.items()):
            rules[:] = [{"matcher": "Bash", "when": when, "requires_confirmation": True}]
            answer, _ = decision(hook(srv, pre("Bash", {"command": f"ls {i}", **ARGS},
                                               f"toolu_{i}")))
            attempt.record(f"Claude Code endpoint when at call time: {name}",
                           answer != "deny")
            assert answer == "deny", name
        assert len(pending(srv)) == 1 + len(AT_RUN_TIME)

        # A rule that could only be stopped, slipped in after the check: every call is denied.
        rules[:] = [{"matcher": "Bash", "when": CONSTANT["a power tower"],
                     "requires_confirmation": True}]
        answer, why = decision(hook(srv, pre("Bash", {"command": "ls"}, "toolu_tower")))
        attempt.record("Claude Code endpoint: a power tower declared at run time",
                       answer != "deny")
        assert answer == "deny" and "claude_code.rules[0]" in why, why


# -- the MCP gateway over HTTP ------------------------------------------------------------------


@pytest.mark.both_databases
async def test_an_mcp_call_whose_gate_rule_is_stopped_waits_for_a_person(
        tmp_path: Path, database_url: str, attempt: Tally) -> None:
    world = make_world(tmp_path, database_url)
    config = world.config_path.read_text()
    assert "when: args.max_count > 50" in config
    world.config_path.write_text(config.replace(
        "when: args.max_count > 50", "when: args.max_count ** args.max_count > 10**6"))
    with live_server(world.deployment()) as server:
        await _gated_git_log(server, world.repo, attempt)


async def _gated_git_log(server: LiveServer, repo: Path, attempt: Tally) -> None:
    url = f"{server.url}/mcp/coder"
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as api, \
            http_client(url, "alice") as client:
        small = await client.call_tool("mcp__git__git_log",
                                       {"repo_path": str(repo), "max_count": 5})
        assert not small.is_error and "first" in text(small)
        assert await pending_requests(api) == []

        big = asyncio.create_task(client.call_tool(
            "mcp__git__git_log", {"repo_path": str(repo), "max_count": HUGE_N}))
        request = await one_pending(api)
        attempt.record("MCP gateway: args.max_count ** args.max_count with a huge count",
                       big.done() and not (await big).is_error)
        assert not big.done()
        assert request["payload"]["args"]["max_count"] == HUGE_N
        await decide(api, request["id"], "reject")
        result = await asyncio.wait_for(big, 30)
    assert result.is_error and "did not run" in text(result), text(result)
    assert outcome(result)["blocked_by"] == "approval_gate"
