"""The coding agents' rules are one neutral section (hookgate.external.coding.policy):
``coding_agents:``, or ``claude_code:`` (its first name, public, kept). Codex and Claude Code
read the same rules under either name, over real HTTP and a real database; an agent that
declares both names cannot run, rather than one silently winning."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate import Agent
from hookgate.claude_code.policy import ExternalPolicy
from hookgate.external.coding.policy import CodingAgentPolicy
from hookgate.hooks.errors import HookBuildError
from tests.claude_code.scene import TOKEN, coder
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases

RULES = [{"matcher": "Bash", "command": [["git", "push"]], "requires_confirmation": True,
          "reason": "pushes need a second pair of eyes"}]
PUSH = {"command": "git push origin main"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(params=["coding_agents", "claude_code"])
def srv(request: pytest.FixtureRequest, database_url: str) -> Iterator[LiveServer]:
    deployment = coder(wait_s=0.2)
    deployment.database_url = database_url
    agent = deployment.agents["coder"]
    agent.confirmation_mode = "inline_only"
    agent.approval_channel_id = None
    del agent.model_config_json["claude_code"]
    agent.model_config_json[request.param] = {"wait_s": 0.2, "rules": RULES}
    with live_server(deployment) as server:
        yield server


def pre(call_id: str, session: str) -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "session_id": session, "cwd": "/work/repo",
            "permission_mode": "default", "tool_name": "Bash", "tool_input": PUSH,
            "tool_use_id": call_id, "transcript_path": None}


def test_codex_and_claude_code_meet_the_same_rule_under_either_name(srv: LiveServer) -> None:
    codex = httpx.post(f"{srv.url}/api/codex/hooks", params={"agent": "coder"},
                       json={**pre("call_1", "codex-s"), "turn_id": "t-1",
                             "model": "gpt-5-codex"}, headers=AUTH, timeout=30)
    assert codex.status_code == 403, codex.text
    assert "pending" in codex.text
    claude = httpx.post(f"{srv.url}/api/claude-code/hooks", params={"agent": "coder"},
                        json=pre("toolu_1", "claude-s"), headers=AUTH, timeout=30)
    assert claude.status_code == 200, claude.text
    assert claude.json()["hookSpecificOutput"]["permissionDecision"] == "deny"
    requests = httpx.get(f"{srv.url}/api/confirmations", params={"status": "pending"},
                         headers=AUTH, timeout=30).json()
    assert len(requests) == 2
    assert all("second pair of eyes" in str(r) for r in requests)
    # A command no rule names is not gated on either endpoint.
    ls = httpx.post(f"{srv.url}/api/codex/hooks", params={"agent": "coder"},
                    json={**pre("call_2", "codex-s"), "tool_input": {"command": "ls"}},
                    headers=AUTH, timeout=30)
    assert (ls.status_code, ls.text) == (200, "{}")


def _agent(config: dict[str, Any]) -> Agent:
    return Agent(id="coder", name="coder", instructions="", tools=[],
                 model_config_json=config)


@pytest.mark.parametrize("policy", [CodingAgentPolicy, ExternalPolicy])
def test_one_section_under_two_names_is_refused(policy: type[CodingAgentPolicy]) -> None:
    both = _agent({"coding_agents": {"rules": RULES}, "claude_code": {"rules": []}})
    with pytest.raises(HookBuildError, match="both coding_agents and claude_code"):
        policy.of(both)
    for name in ("coding_agents", "claude_code"):
        read = policy.of(_agent({name: {"wait_s": 3, "rules": RULES}}))
        assert read.wait_s == 3 and len(read.rules) == 1
