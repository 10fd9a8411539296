"""`cedar_policy`: permit lets a call run, forbid blocks it with the policy's reason, @ask
takes it to a person with that reason on the card, and a call no policy permits gets the
declared default; the deciding policies and the set's version reach the trace and the
audit row."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import select

from hookgate.approvals.card_text import card_reasons
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.storage.database import Database
from hookgate.storage.tables import ConnectorCallLog
from tests.engines.world import ALICE, pending
from tests.policies.world import (
    INVARIANTS,
    PAID,
    PAYMENTS_ONLY,
    agent,
    call,
    run,
    tool_events,
    write_policies,
)

PAY_SMALL = call("oa__purchase_pay", amount=12000, vendor="ACME")
PAY_BIG = call("oa__purchase_pay", amount=60000, vendor="ACME")
LOOKUP = call("crm__lookup", customer="Globex")


async def audit_details(db: Database) -> list[tuple[str, str | None, str | None]]:
    t = ConnectorCallLog.__table__
    async with db.engine.connect() as conn:
        rows = await conn.execute(select(t.c.tool_name, t.c.outcome, t.c.detail)
                                  .order_by(t.c.id))
        return [tuple(r) for r in rows]


async def test_a_permitted_call_runs_and_the_trace_and_audit_row_name_the_policy(
        pdb: Database, folder: Path) -> None:
    write_policies(folder, INVARIANTS)
    PAID.clear()

    result = await run(pdb, agent(folder), PAY_SMALL)

    (pay,) = tool_events(result)
    assert pay["status"] == "ok" and PAID == [{"amount": 12000, "vendor": "ACME"}]
    said = " ".join(pay["side_effects"])
    assert "policy allow by tools-allowed [policy set cedar-" in said
    (row,) = [r for r in await audit_details(pdb) if r[1] == "ok"][-1:]
    assert row[2] is not None and "allow by tools-allowed" in row[2] and "cedar-" in row[2]


async def test_a_forbid_blocks_the_call_with_its_reason_in_the_trace_and_audit_row(
        pdb: Database, folder: Path) -> None:
    write_policies(folder, INVARIANTS)
    PAID.clear()

    result = await run(pdb, agent(folder), PAY_SMALL, LOOKUP, user="bob", org="ro")

    pay, lookup = tool_events(result)
    assert pay["status"] == "blocked" and pay["blocked_by"] == "cedar_policy"
    assert "deny by read-only-org (the org is read-only: no tool that writes runs)" in \
        pay["observation"]
    assert lookup["status"] == "ok"  # a read in a read-only org still runs
    assert PAID == []
    blocked = [r for r in await audit_details(pdb) if r[1] == "blocked"][-1]
    assert "read-only-org" in str(blocked[2]) and "policy set cedar-" in str(blocked[2])


async def test_a_sensitive_call_on_an_agent_without_an_audit_log_is_refused(
        pdb: Database, folder: Path) -> None:
    write_policies(folder, INVARIANTS)

    result = await run(pdb, agent(folder, audited=False), PAY_SMALL)

    (pay,) = tool_events(result)
    assert pay["status"] == "blocked" and "audit-sensitive" in pay["observation"]


async def test_an_ask_policy_takes_the_call_to_a_person_with_its_reason_on_the_card(
        pdb: Database, folder: Path) -> None:
    write_policies(folder, INVARIANTS)
    PAID.clear()
    service = PersistentApprovals(pdb, sweep_interval=0.2)
    await service.start()
    try:
        running = asyncio.create_task(run(pdb, agent(folder), PAY_BIG, approvals=service))
        (request,) = await pending(service)
        lines = card_reasons(request.context)
        await service.decide(request.id, "approve", ALICE)
        result = await running
    finally:
        await service.stop()

    assert any("hook 'cedar_policy' answered ask: payments above 50,000 need a person's "
               "approval (policy big-payments, policy set cedar-" in line for line in lines)
    (pay,) = tool_events(result)
    assert pay["status"] == "ok" and PAID == [{"amount": 60000, "vendor": "ACME"}]
    assert any("ask by big-payments" in s for s in pay["side_effects"])


async def test_without_an_approval_service_an_asked_call_does_not_run(
        pdb: Database, folder: Path) -> None:
    write_policies(folder, INVARIANTS)
    PAID.clear()

    result = await run(pdb, agent(folder), PAY_BIG)

    (pay,) = tool_events(result)
    assert pay["status"] == "blocked" and pay["blocked_by"] == "approval_gate"
    assert PAID == []
    assert any("ask by big-payments" in s for s in pay["side_effects"])


async def test_a_call_no_policy_permits_gets_the_declared_default(
        pdb: Database, tmp_path: Path) -> None:
    deny_folder = write_policies(tmp_path / "deny", PAYMENTS_ONLY)
    allow_folder = write_policies(tmp_path / "allow", PAYMENTS_ONLY)

    denied = await run(pdb, agent(deny_folder, default="deny"), LOOKUP)
    allowed = await run(pdb, agent(allow_folder, default="allow"), LOOKUP)

    (lookup,) = tool_events(denied)
    assert lookup["status"] == "blocked"
    assert "no policy permits 'crm__lookup' here; the default is deny" in lookup["observation"]
    (lookup,) = tool_events(allowed)
    assert lookup["status"] == "ok"
    assert any("the default is allow" in s for s in lookup["side_effects"])


async def test_an_evaluation_error_denies_the_call_and_says_why(
        pdb: Database, folder: Path) -> None:
    write_policies(folder, """\
@id("overflowing")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args has units && context.args.units * 9223372036854775807 > 0 };
""")
    PAID.clear()

    result = await run(pdb, agent(folder), call("oa__purchase_pay", amount=5, vendor="ACME",
                                                units=2))

    (pay,) = tool_events(result)
    assert pay["status"] == "blocked" and PAID == []
    assert "the policies could not be evaluated" in pay["observation"]
    assert "overflow" in pay["observation"]


async def test_a_caller_the_database_does_not_know_is_denied(
        pdb: Database, folder: Path) -> None:
    write_policies(folder, INVARIANTS)

    result = await run(pdb, agent(folder), LOOKUP, user="mallory")

    (lookup,) = tool_events(result)
    assert lookup["status"] == "blocked"
    assert "user 'mallory' is not an active user" in lookup["observation"]
