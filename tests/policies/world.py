"""The policies' world: an OA system whose payments write, a CRM that reads, the seed's
three invariants written in Cedar, and agents that declare `cedar_policy`, run by the real
engine over a real database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hookgate import Agent, ReActEngine, ScriptedLLM, tool
from hookgate.engines.result import RunResult
from hookgate.hooks.services import HookServices
from hookgate.storage.database import Database

INVARIANTS = """\
// Every tool in the catalog may be called, unless a rule below says otherwise.
@id("tools-allowed")
permit(principal, action in Action::"call_tool", resource);

@id("audit-sensitive")
@reason("sensitive calls run only on agents that keep an audit log")
forbid(principal, action in Action::"call_tool", resource)
when { (context.writes || context.requires_confirmation) && !resource.audited };

@id("read-only-org")
@reason("the org is read-only: no tool that writes runs")
forbid(principal, action in Action::"call_tool", resource)
when { context.writes && context.org_read_only };

@id("big-payments")
@ask("payments above 50,000 need a person's approval")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.amount.greaterThan(decimal("50000.0")) };
"""

PAYMENTS_ONLY = """\
@id("payments")
permit(principal, action == Action::"oa__purchase_pay", resource);
"""


@tool(writes=True, requires_confirmation=lambda a: a["amount"] > 50_000)
async def oa__purchase_pay(amount: float, vendor: str, memo: str | None = None,
                           units: int = 1) -> str:
    """Pay a vendor."""
    PAID.append({"amount": amount, "vendor": vendor})
    return f"paid {amount:.0f} to {vendor}"


@tool
async def crm__lookup(customer: str) -> dict[str, Any]:
    """Look a customer up."""
    return {"customer": customer, "tier": "gold"}


TOOLS = [oa__purchase_pay, crm__lookup]
#: What really ran.
PAID: list[dict[str, Any]] = []


def write_policies(folder: Path, text: str, name: str = "invariants.cedar") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return folder


def agent(policies: Path, *, default: str = "deny", audited: bool = True,
          agent_id: str = "buyer") -> Agent:
    hooks: list[Any] = [{"name": "cedar_policy",
                         "params": {"policies": str(policies), "default": default}}]
    if audited:
        hooks.append("audit_log")
    return Agent(id=agent_id, name="Purchasing agent", instructions="buy", tools=list(TOOLS),
                 org_id="acme", owner_user_id="alice",
                 model_config_json={"hooks": {"class_hooks": hooks}})


def call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "args": args}]}


async def run(db: Database, the_agent: Agent, *turns: dict[str, Any], user: str = "alice",
              org: str = "acme", approvals: Any = None, message: str = "go") -> RunResult:
    engine = ReActEngine(ScriptedLLM([*turns, {"answer": "done"}]),
                         services=HookServices(database=db, approvals=approvals))
    return await engine.run(the_agent, message, user_id=user, org_id=org)


def tool_events(result: RunResult) -> list[dict[str, Any]]:
    return [e for e in result.trace if e["type"] in ("tool_result", "tool_blocked")]
