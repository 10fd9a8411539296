"""A small world for the built-in hooks: an OA system whose payments write (and above 50,000
need a person), a CRM that only reads, and agents that declare the hooks under test, run by
the real engine over the test's real database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, text

from hookgate import Agent, ReActEngine, ScriptedLLM, Tool, tool
from hookgate.engines.result import RunResult
from hookgate.hooks.services import HookServices
from hookgate.storage.database import Database
from hookgate.storage.orgs import sync_orgs
from hookgate.storage.tables import ConnectorCallLog


class OA:
    """Counts what really ran."""

    def __init__(self) -> None:
        self.payments: list[dict[str, Any]] = []
        self.lookups = 0

    def tools(self) -> list[Tool]:
        @tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)
        async def oa__purchase_pay(amount: float, vendor: str, api_key: str = "") -> str:
            """Pay a vendor."""
            self.payments.append({"amount": amount, "vendor": vendor})
            return f"paid {amount:.0f} to {vendor}"

        @tool
        async def crm__lookup(customer: str) -> dict[str, Any]:
            """Look a customer up."""
            self.lookups += 1
            return {"customer": customer, "tier": "gold"}

        @tool(writes=True)
        async def oa__broken(note: str) -> str:
            """A write that fails."""
            raise ConnectionError("OA is down")

        return [oa__purchase_pay, crm__lookup, oa__broken]


def agent(oa: OA, *hooks: Any, org: str | None = "acme", agent_id: str = "buyer") -> Agent:
    return Agent(id=agent_id, name="Purchasing agent", instructions="buy", tools=oa.tools(),
                 org_id=org, owner_user_id="alice",
                 model_config_json={"hooks": {"class_hooks": list(hooks)}})


def call(name: str, call_id: str | None = None, **args: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "args": args}
    if call_id is not None:
        c["id"] = call_id
    return {"tool_calls": [c]}


async def run(db: Database, the_agent: Agent, *turns: dict[str, Any], user: str = "alice",
              org: str | None = "acme") -> RunResult:
    engine = ReActEngine(ScriptedLLM([*turns, {"answer": "done"}]),
                         services=HookServices(database=db))
    return await engine.run(the_agent, "go", user_id=user, org_id=org)


def tool_events(result: RunResult) -> list[dict[str, Any]]:
    return [e for e in result.trace if e["type"] in ("tool_result", "tool_blocked")]


async def with_orgs(db: Database, *orgs: tuple[str, bool]) -> None:
    await sync_orgs(db, [(o, o.upper(), ro) for o, ro in orgs])


async def log_rows(db: Database) -> list[dict[str, Any]]:
    """Every audit row, typed, in chain order."""
    t = ConnectorCallLog.__table__
    async with db.engine.connect() as conn:
        rows = await conn.execute(select(t).order_by(t.c.chain, t.c.seq))
        return [dict(r) for r in rows.mappings()]


async def sql(db: Database, statement: str, **params: Any) -> None:
    async with db.engine.begin() as conn:
        await conn.execute(text(statement), params)
