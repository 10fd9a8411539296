"""Cedar policies read each limit's own figures under its name
(``context.limits.by_name.getTag("NAME")``), not only the tightest ones: a policy on one of
two limits is enforced by that limit's count and sum, on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookgate import Agent
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.users import DeclaredUser, sync_declared_users
from tests.policies.world import PAID, TOOLS, call, run, tool_events, write_policies

pytestmark = pytest.mark.both_databases

#: The agent's spending is capped far above the user's, so the tightest sum is always the
#: user's: only the figures under ``by_agent`` can refuse the agent's 3,001st.
LIMITS = {"by_user": {"tools": ["oa__purchase_pay"], "per": "user", "window": "1h",
                      "sum": "amount", "max": 1_000_000},
          "by_agent": {"tools": ["oa__purchase_pay"], "per": "agent", "window": "1h",
                       "sum": "amount", "max": 2_000_000, "count": 1_000},
          "lookups": {"tools": ["crm__lookup"], "per": "session", "window": "1h",
                      "count": 50}}
POLICIES = """\
@id("tools-allowed")
permit(principal, action in Action::"call_tool", resource);

@id("agent-spends-3000-an-hour")
@reason("the agent paid more than 3,000 this hour")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.limits.by_name.hasTag("by_agent")
       && context.limits.by_name.getTag("by_agent") has sum_used
       && context.limits.by_name.getTag("by_agent").sum_used.greaterThan(decimal("3000.0")) };

@id("agent-third-payment")
@reason("the agent's third payment this hour")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.limits.by_name.hasTag("by_agent")
       && context.limits.by_name.getTag("by_agent").count_used >= 3 };

@id("lookups-left")
@reason("fewer than 48 lookups left")
forbid(principal, action == Action::"crm__lookup", resource)
when { context.limits.by_name.hasTag("lookups")
       && context.limits.by_name.getTag("lookups") has count_remaining
       && context.limits.by_name.getTag("lookups").count_remaining < 48 };
"""


@pytest.fixture
async def limits_db(db: Database) -> Database:
    await sync_orgs(db, [("acme", "ACME", False)])
    await sync_declared_users(db, [DeclaredUser("alice", "acme", admin=True),
                                   DeclaredUser("carol", "acme")])
    return db


def agent(policies: Path) -> Agent:
    hooks: list[Any] = [
        {"name": "session_limits", "params": {"limits": LIMITS}},
        {"name": "cedar_policy", "params": {"policies": str(policies), "default": "deny"}}]
    return Agent(id="buyer", name="buyer", instructions="buy", tools=list(TOOLS),
                 org_id="acme", owner_user_id="alice",
                 model_config_json={"hooks": {"class_hooks": hooks}})


async def test_a_policy_on_one_limit_reads_that_limits_sum(limits_db: Database,
                                                           tmp_path: Path) -> None:
    folder = write_policies(tmp_path / "policies", POLICIES)
    PAID.clear()
    first = await run(limits_db, agent(folder), call("oa__purchase_pay", amount=2000,
                                                     vendor="ACME"), user="alice")
    # carol's own sum is 2,000 (the tightest, by_user's); the agent's is 4,000: refused.
    second = await run(limits_db, agent(folder),
                       call("oa__purchase_pay", amount=2000, vendor="ACME"),
                       call("oa__purchase_pay", amount=1000, vendor="ACME"), user="carol")
    assert [e["status"] for e in tool_events(first)] == ["ok"]
    events = tool_events(second)
    assert [e["status"] for e in events] == ["blocked", "ok"], events
    assert "the agent paid more than 3,000 this hour" in events[0]["observation"]
    # The refused 2,000 gave its claims back: the agent's sum is 3,000, not more.
    assert [p["amount"] for p in PAID] == [2000, 1000]


async def test_a_policy_on_one_limit_reads_that_limits_count(limits_db: Database,
                                                             tmp_path: Path) -> None:
    folder = write_policies(tmp_path / "policies", POLICIES)
    PAID.clear()
    result = await run(limits_db, agent(folder),
                       *[call("oa__purchase_pay", amount=1, vendor="ACME") for _ in range(3)],
                       *[call("crm__lookup", customer=str(i)) for i in range(4)])
    events = tool_events(result)
    assert [e["status"] for e in events] == ["ok", "ok", "blocked",
                                             "ok", "ok", "blocked", "blocked"], events
    assert "the agent's third payment this hour" in events[2]["observation"]
    assert "fewer than 48 lookups left" in events[5]["observation"]


async def test_a_limit_that_did_not_count_the_call_has_no_tag(limits_db: Database,
                                                               tmp_path: Path) -> None:
    folder = write_policies(tmp_path / "policies", POLICIES + """
@id("lookup-counted-by-payments")
@reason("a lookup counted by a payments limit")
forbid(principal, action == Action::"crm__lookup", resource)
when { context.limits.by_name.hasTag("by_agent") };
""")
    result = await run(limits_db, agent(folder), call("crm__lookup", customer="x"))
    assert [e["status"] for e in tool_events(result)] == ["ok"]
