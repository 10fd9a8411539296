"""A deployment for the server tests of the built-in hooks: org acme (admin alice, member
bob), org other (mallory), and agents that declare audit_log and readonly_guard."""

from __future__ import annotations

from typing import Any

from hookgate import Agent, ScriptedLLM
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.hooks_builtin.world import OA

TOKENS = {"alice": "tok-alice", "bob": "tok-bob", "mallory": "tok-mallory"}
HOOKS = ["audit_log", "readonly_guard"]


def deployment(database_url: str, oa: OA, turns: list[dict[str, Any]]) -> Deployment:
    def make(agent_id: str, org: str) -> Agent:
        return Agent(id=agent_id, name=agent_id, instructions="", tools=oa.tools(),
                     org_id=org, owner_user_id="alice",
                     model_config_json={"hooks": {"class_hooks": HOOKS}})

    return Deployment(
        database_url=database_url,
        orgs=[OrgSpec("acme", "ACME Corp"), OrgSpec("other", "Other Inc")],
        users=[
            UserSpec("alice", "acme", admin=True, token_sha256=token_digest(TOKENS["alice"])),
            UserSpec("bob", "acme", token_sha256=token_digest(TOKENS["bob"])),
            UserSpec("mallory", "other", admin=True,
                     token_sha256=token_digest(TOKENS["mallory"])),
        ],
        agents={"buyer": make("buyer", "acme"), "clerk": make("clerk", "acme"),
                "rival": make("rival", "other")},
        model_for=lambda _agent_id: ScriptedLLM([*turns, {"answer": "done"}]),
    )


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}
