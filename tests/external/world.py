"""A server with one external agent for the tests of the external core: ``payer`` (rules:
``transfer`` needs a person), users alice (admin, approver) and bot (the agent's token)."""

from __future__ import annotations

from typing import Any

import httpx

from hookgate import Agent, ScriptedLLM
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.live_server import LiveServer

BOT, ALICE = "tok-bot", "tok-alice"


def deployment(url: str, *, command_hooks: list[dict[str, Any]] | None = None) -> Deployment:
    agent = Agent(
        id="payer", name="payer", instructions="", tools=[], org_id="acme",
        owner_user_id="alice", confirmation_approver_scope="agent_owner",
        model_config_json={
            "hooks": {"class_hooks": ["audit_log"], "command_hooks": command_hooks or []},
            "guarded_calls": {"rules": [{"matcher": "transfer",
                                         "requires_confirmation": True}]},
        })
    return Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME"), OrgSpec("other", "Other")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest(ALICE)),
               UserSpec("bot", "acme", token_sha256=token_digest(BOT))],
        agents={"payer": agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[])


def h(token: str = BOT) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def ask(url: str, session: str, call_id: str, tool: str, arguments: dict[str, Any],
        token: str = BOT) -> httpx.Response:
    return httpx.post(f"{url}/api/v1/calls", headers=h(token), timeout=30, json={
        "agent": "payer", "session_id": session, "call_id": call_id, "tool": tool,
        "arguments": arguments})


def audit_rows(srv: LiveServer | str, call_id: str) -> list[dict[str, Any]]:
    url = srv if isinstance(srv, str) else srv.url
    r = httpx.get(f"{url}/api/audit", params={"limit": 500}, headers=h(ALICE), timeout=30)
    assert r.status_code == 200, r.text
    return [row for row in r.json()["items"] if row["tool_call_id"] == call_id]
