"""The demo's world: one org, two people, a purchasing agent on a scripted model that pays
what the message asks, and a payment tool that needs a person's approval above 50,000."""

from __future__ import annotations

import secrets
from pathlib import Path

from hookgate.agent import Agent
from hookgate.demo.model import demo_turn
from hookgate.examples.purchasing import oa__list_vendors, oa__purchase_pay
from hookgate.llm.scripted import ScriptedLLM
from hookgate.server.deployment import Deployment, OrgSpec, UserSpec, token_digest

DEMO_MESSAGE = "Pay ACME for the Q3 hardware order: 12,000 now and the 60,000 balance."


def demo_agent() -> Agent:
    return Agent(
        id="buyer",
        name="Purchasing agent",
        instructions="You pay approved vendors for what the user asks.",
        tools=[oa__purchase_pay, oa__list_vendors],
        org_id="acme",
        owner_user_id="alice",
        confirmation_mode="inline_only",
        confirmation_approver_scope="org_members",
        model_config_json={"hooks": {"class_hooks": ["result_truncate"]}},
    )


def demo_deployment(directory: Path, public_url: str) -> tuple[Deployment, str]:
    """The demo deployment with a SQLite file in ``directory``, and a fresh token for alice."""
    token = "demo-" + secrets.token_urlsafe(18)
    deployment = Deployment(
        database_url=f"sqlite+aiosqlite:///{directory / 'hookgate-demo.db'}",
        orgs=[OrgSpec("acme", "ACME Corp")],
        users=[
            UserSpec("alice", "acme", admin=True, name="Alice (finance)",
                     token_sha256=token_digest(token)),
            UserSpec("bob", "acme", name="Bob (buyer)"),
        ],
        agents={"buyer": demo_agent()},
        model_for=lambda _agent_id: ScriptedLLM(demo_turn),
        public_url=public_url,
    )
    return deployment, token
