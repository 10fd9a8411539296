"""A small deployment for server tests: one org with three users, one purchasing agent."""

from __future__ import annotations

from typing import Any

from hookgate import Agent, ScriptedLLM, tool
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest

TOKENS = {"alice": "tok-alice", "bob": "tok-bob", "olivia": "tok-olivia",
          "mallory": "tok-mallory"}


class Ledger:
    """The 'bank': records every payment that actually ran."""

    def __init__(self) -> None:
        self.payments: list[dict[str, Any]] = []


def world(database_url: str, *, scope: str = "initiator", timeout_s: float = 3600,
          turns: list[dict[str, Any]] | None = None) -> tuple[Deployment, Ledger]:
    bank = Ledger()

    @tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)
    async def oa__purchase_pay(amount: float, vendor: str) -> str:
        """Pay a vendor."""
        bank.payments.append({"amount": amount, "vendor": vendor})
        return f"paid {amount:.0f} to {vendor}"

    agent = Agent(id="buyer", name="Purchasing agent", instructions="You buy things.",
                  tools=[oa__purchase_pay], org_id="acme", owner_user_id="olivia",
                  confirmation_approver_scope=scope,  # type: ignore[arg-type]
                  confirmation_timeout_s=timeout_s)
    script = turns or [
        {"tool_calls": [{"name": "oa__purchase_pay",
                         "args": {"amount": 60000, "vendor": "ACME"}}]},
        {"answer": "Paid ACME."},
    ]
    deployment = Deployment(
        database_url=database_url,
        orgs=[OrgSpec("acme", "ACME Corp"), OrgSpec("other", "Other Inc")],
        users=[
            UserSpec("alice", "acme", admin=True, token_sha256=token_digest(TOKENS["alice"])),
            UserSpec("bob", "acme", token_sha256=token_digest(TOKENS["bob"])),
            UserSpec("olivia", "acme", token_sha256=token_digest(TOKENS["olivia"])),
            UserSpec("mallory", "other", token_sha256=token_digest(TOKENS["mallory"])),
        ],
        agents={"buyer": agent},
        model_for=lambda _agent_id: ScriptedLLM(script),
    )
    return deployment, bank


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}
