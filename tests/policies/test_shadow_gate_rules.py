"""Gate rules in shadow mode: a real `hookgate serve` decides an external agent's calls
(`POST /api/v1/calls`) with ``guarded_calls.rules``; a rule with ``mode: shadow`` that asks
for a person never asks (the call runs) and its would-ask lands in the audit row's detail,
the same rule enforcing asks, and a bad ``mode`` is refused with the one-line error; a
Claude Code hook (``POST /api/claude-code/hooks``) with a shadow ``claude_code`` rule is not
asked either (hookgate.external.policy.CallRules: every path that reads the rules)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.agent import Agent
from hookgate.external.policy import CallRules
from hookgate.hooks.errors import HookBuildError
from tests.claude_code.scene import GATED, REASON, TOKEN, coder
from tests.claude_code.test_hook_endpoint import PUSH, decision, hook, pre
from tests.instances import Instance
from tests.live_server import live_server

CONFIG = """\
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme}}]
users:
  - {{id: alice, org: acme, admin: true, token: tok-alice}}
  - {{id: bob, org: acme, token: tok-bob}}
models: {{script: {{type: scripted, turns: [{{answer: done}}]}}}}
agents:
  - id: scout
    org: acme
    owner: alice
    model: script
    model_config_json:
      hooks: {{class_hooks: [audit_log]}}
      guarded_calls:
        rules: [{{matcher: web__search, requires_confirmation: true, mode: shadow,
                  connector: watched, reason: searches are watched}}]
  - id: strict
    org: acme
    owner: alice
    model: script
    model_config_json:
      hooks: {{class_hooks: [audit_log]}}
      guarded_calls:
        rules: [{{matcher: web__search, requires_confirmation: true, mode: enforce,
                  reason: searches are watched}}]
"""
SEARCH = {"type": "object", "properties": {"query": {"type": "string"}},
          "required": ["query"]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Instance, Path]]:
    tmp_path = tmp_path_factory.mktemp("shadow-gate-rules")
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db"), encoding="utf-8")
    server = Instance("shadow-gate-rules", config, tmp_path)
    server.spawn()
    try:
        server.wait_up()
        yield server, tmp_path / "hookgate.db"
    finally:
        server.stop()


async def _ask(client: httpx.AsyncClient, agent: str, call_id: str) -> dict[str, Any]:
    body = {"agent": agent, "session_id": f"s-{agent}", "call_id": call_id,
            "tool": "web__search", "arguments": {"query": "cedar"}, "parameters": SEARCH}
    answer: dict[str, Any] = (await client.post(
        "/api/v1/calls", json=body, headers={"Authorization": "Bearer tok-bob"})).json()
    return answer


async def test_a_shadow_gate_rule_never_asks_and_its_would_ask_is_audited(
        served: tuple[Instance, Path]) -> None:
    server, db = served
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        shadow = await _ask(client, "scout", "c-shadow")
        assert shadow["decision"] == "allow", shadow
        reported = await client.post(f"/api/v1/calls/{shadow['call']}/result",
                                     json={"output": "3 results"},
                                     headers={"Authorization": "Bearer tok-bob"})
        assert reported.status_code == 200, reported.text
        enforced = await _ask(client, "strict", "c-enforce")
    # The same rule enforcing asks a person.
    assert enforced["decision"] == "pending", enforced
    assert "searches are watched" in (enforced.get("reason") or "") or enforced["request_id"]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT agent_id, outcome, detail, connector "
                            "FROM connector_call_logs WHERE tool_name = 'web__search' "
                            "ORDER BY id").fetchall()
    ran = [(outcome, detail, connector) for agent, outcome, detail, connector in rows
           if agent == "scout"]
    assert [outcome for outcome, _, _ in ran] == ["ok"], rows
    # Nor does the shadow rule's connector reach the call.
    assert ran[0][2] == "guarded_calls", rows
    detail = ran[0][1] or ""
    assert "shadow rule guarded_calls.rules[0] of agent 'scout'" in detail, detail
    assert "would ask" in detail and "searches are watched" in detail, detail


def test_a_bad_mode_on_a_gate_rule_is_refused_at_load() -> None:
    rules = [{"matcher": "web__search", "requires_confirmation": True, "mode": "observe"}]
    agent = Agent(id="scout", name="scout", instructions="", tools=[],
                  model_config_json={"guarded_calls": {"rules": rules}})
    with pytest.raises(HookBuildError) as raised:
        CallRules.read(agent, "guarded_calls", default_wait_s=0.0)
    message = str(raised.value)
    assert "\n" not in message
    assert "guarded_calls.rules[0]" in message
    assert "'mode' must be 'enforce' or 'shadow', got 'observe'" in message


@pytest.mark.parametrize("mode", ["shadow", "enforce"])
def test_a_claude_code_hook_is_not_asked_by_a_shadow_rule(database_url: str, mode: str) -> None:
    deployment = coder(wait_s=0.3, rules=[{"matcher": "Bash", "when": GATED,
                                           "requires_confirmation": True, "reason": REASON,
                                           "mode": mode}])
    deployment.database_url = database_url
    agent = deployment.agents["coder"]
    agent.confirmation_mode = "inline_only"
    agent.approval_channel_id = None
    with live_server(deployment) as srv:
        said, why = decision(hook(srv, pre("Bash", PUSH, "toolu_s")))
        pending = httpx.get(f"{srv.url}/api/confirmations", params={"status": "pending"},
                            headers={"Authorization": f"Bearer {TOKEN}"}).json()
        if mode == "enforce":  # the same rule enforcing asks a person
            assert said == "deny" and len(pending) == 1, (said, why, pending)
            return
        assert (said, pending) == (None, []), (said, why, pending)
        done = dict(pre("Bash", PUSH, "toolu_s"), hook_event_name="PostToolUse",
                    tool_response={"stdout": "", "stderr": "", "interrupted": False},
                    duration_ms=5)
        assert hook(srv, done).status_code == 200
        rows = httpx.get(f"{srv.url}/api/audit", headers={"Authorization": f"Bearer {TOKEN}"}
                         ).json()["items"]
    [row] = [r for r in rows if r["tool_call_id"] == "toolu_s"]
    assert row["outcome"] == "ok", row
    assert "shadow rule claude_code.rules[0] of agent 'coder': would ask" in row["detail"]
    assert REASON in row["detail"], row


def test_hookgate_check_refuses_a_bad_mode_on_a_guarded_calls_rule(tmp_path: Path) -> None:
    # guarded_calls.rules are read per call; `hookgate check` (and serve's start) reads them
    # at load, so a typo is a load error, not every call of the agent refused.
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "h.db").replace("mode: shadow",
                                                                  "mode: observe"))
    done = subprocess.run([sys.executable, "-m", "hookgate.cli.main", "check", "--config",
                           str(config)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "agents[0] ('scout')" in done.stderr, done.stderr
    assert "'mode' must be 'enforce' or 'shadow', got 'observe'" in done.stderr, done.stderr
