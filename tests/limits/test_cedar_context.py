"""Cedar policies see what the session limits' claim found (``context.limits``): the count
and the sum this call makes, in flight included; a call the policies then refuse gives its
claim back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hookgate import Agent
from hookgate.storage.database import Database
from tests.policies.world import PAID, TOOLS, call, run, tool_events, write_policies

POLICIES = """\
@id("tools-allowed")
permit(principal, action in Action::"call_tool", resource);

@id("payments-over-3000-an-hour")
@reason("more than 3,000 in payments an hour")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.limits has sum_used && context.limits.sum_used.greaterThan(decimal("3000.0")) };

@id("third-lookup")
@reason("a third lookup in the session")
forbid(principal, action == Action::"crm__lookup", resource)
when { context.limits.names.contains("lookups") && context.limits has count_used
       && context.limits.count_used >= 3 };
"""
LIMITS = {"payments": {"tools": ["oa__purchase_pay"], "per": "user", "window": "1h",
                       "sum": "amount", "max": 1_000_000},
          "lookups": {"tools": ["crm__lookup"], "per": "session", "window": "1h",
                      "count": 100}}


def agent(policies: Path) -> Agent:
    hooks: list[Any] = [
        {"name": "session_limits", "params": {"limits": LIMITS}},
        {"name": "cedar_policy", "params": {"policies": str(policies), "default": "deny"}}]
    return Agent(id="buyer", name="buyer", instructions="buy", tools=list(TOOLS),
                 org_id="acme", owner_user_id="alice",
                 model_config_json={"hooks": {"class_hooks": hooks}})


async def test_the_policies_see_the_sum_with_this_call_and_a_refusal_gives_it_back(
        pdb: Database, folder: Path) -> None:
    write_policies(folder, POLICIES)
    PAID.clear()
    result = await run(pdb, agent(folder),
                       *[call("oa__purchase_pay", amount=a, vendor="ACME")
                         for a in (2000, 2000, 500, 600)])
    events = tool_events(result)
    assert [e["status"] for e in events] == ["ok", "blocked", "ok", "blocked"]
    assert "more than 3,000 in payments an hour" in events[1]["observation"]
    # The refused 2,000 gave its claim back: 2,000 + 500 is within 3,000, and 600 more is not.
    assert [p["amount"] for p in PAID] == [2000, 500]


async def test_the_policies_see_the_count_with_this_call(pdb: Database, folder: Path) -> None:
    write_policies(folder, POLICIES)
    result = await run(pdb, agent(folder),
                       *[call("crm__lookup", customer=str(i)) for i in range(4)])
    assert [e["status"] for e in tool_events(result)] == ["ok", "ok", "blocked", "blocked"]
