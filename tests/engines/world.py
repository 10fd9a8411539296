"""A small purchasing world for engine, delegation, workflow and adversarial tests: a real
bank whose payments above 50,000 need a person, agents that use it, and a real approval
service over the test's database. Nothing here stands in for hookgate code."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hookgate import Agent, HookContext, HookResult, HookServices, PreToolUseHook, Tool, tool
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from hookgate.storage.database import Database
from hookgate.storage.ledger import DatabaseLedger

ALICE = Approver("alice", "acme")
GATED = 60_000  # above the 50,000 limit: needs a person's approval


class Bank:
    """Counts what really ran: ``payments`` (gated above 50,000) and ``notes`` (writes)."""

    def __init__(self) -> None:
        self.payments: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.quotes = 0

    def tools(self) -> list[Tool]:
        @tool(requires_confirmation=lambda a: a["amount"] > 50_000, writes=True)
        async def oa__purchase_pay(amount: float, vendor: str) -> str:
            """Pay a vendor."""
            self.payments.append({"amount": amount, "vendor": vendor})
            return f"paid {amount:.0f} to {vendor}"

        @tool
        async def oa__quote(vendor: str) -> dict[str, Any]:
            """Look up what a vendor charges."""
            self.quotes += 1
            return {"vendor": vendor, "amount": 1200}

        @tool(writes=True)
        async def db__write_note(text: str) -> str:
            """Write a note to the database."""
            self.notes.append(text)
            return "noted"

        return [oa__purchase_pay, oa__quote, db__write_note]


class ReadOnlyGuard(PreToolUseHook):
    """Test-local read-only rule: every tool that writes is blocked."""

    name = "test_readonly"
    priority = 50

    def should_trigger(self, ctx: HookContext) -> bool:
        return bool(ctx.metadata.get("writes"))

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(allow=False, error=f"Blocked: the org is read-only; "
                                             f"'{ctx.tool_name}' writes.")


READ_ONLY = f"{__name__}:ReadOnlyGuard"


def make_agent(bank: Bank, agent_id: str = "buyer", *hooks: Any, delegates: list[str] | None = None,
               **fields: Any) -> Agent:
    config: dict[str, Any] = {"hooks": {"class_hooks": list(hooks)}}
    if delegates is not None:
        config["delegates"] = delegates
    fields.setdefault("org_id", "acme")
    fields.setdefault("owner_user_id", "olivia")
    return Agent(id=agent_id, name=agent_id.title(), instructions=f"You are {agent_id}.",
                 tools=bank.tools(), model_config_json=config, **fields)


def services(db: Database, approvals: PersistentApprovals) -> dict[str, Any]:
    """Engine keyword arguments for a server-like run: real approvals, a database ledger."""
    return {"services": HookServices(approvals=approvals, database=db),
            "ledger": DatabaseLedger(db)}


@pytest.fixture
async def approvals(db: Database) -> AsyncIterator[PersistentApprovals]:
    service = PersistentApprovals(db, sweep_interval=0.2)
    await service.start()
    yield service
    await service.stop()


async def pending(approvals: PersistentApprovals, count: int = 1,
                  within: float = 10) -> list[ConfirmationRequest]:
    """Wait until ``count`` requests are pending, as a person's inbox would show them."""
    async with asyncio.timeout(within):
        while True:
            found = [r for r in await approvals.store.list_for_org(org_id="acme")
                     if r.status == "pending"]
            if len(found) >= count:
                return found
            await asyncio.sleep(0.02)


def events(trace: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in trace if e["type"] == type_]


def clean_env() -> dict[str, str]:
    """A bare environment for a CLI subprocess; it keeps PYTHONPATH so that a source tree
    under test (not only the installed one) is what the subprocess imports."""
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env
