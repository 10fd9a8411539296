"""An approval with edits authorises exactly the edited call, over a real database: not the
call as asked, not edited arguments that differ from their recorded digest, and not an
edit the service cannot check against the tool's schema."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest
from sqlalchemy import update

from hookgate import HookContext, HookResult, PreToolUseHook
from hookgate.approvals.edits import agent_tool
from hookgate.approvals.errors import InvalidEdit
from hookgate.approvals.gate import GATE_PRIORITY
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.storage.database import Database
from hookgate.storage.tables import ConfirmationRequestRow
from hookgate.tools.tool import args_digest
from tests.approvals.test_persistent_gate import (
    ALICE,
    Bank,
    engine_for,
    make_agent,
    next_event,
    pay_script,
    start_run,
)

pytestmark = pytest.mark.both_databases


class PutsTheAskedArgumentsBack(PreToolUseHook):
    """Runs after the gate and undoes the approver's edit: what was asked must not run."""

    name = "undo_edit"
    priority = GATE_PRIORITY + 1

    async def execute(self, ctx: HookContext) -> HookResult:
        return HookResult(modified_args={"amount": 60000.0, "vendor": "ACME"})


async def _waiting(db: Database, approvals: PersistentApprovals, agent: Any
                   ) -> tuple[asyncio.Task[Any], str]:
    """A run of ``agent`` started and waiting at the gate: its task and request id."""
    task, events = await start_run(engine_for(db, approvals, pay_script()), agent)
    return task, (await next_event(events, "confirmation_pending")).data["request_id"]


async def test_the_asked_call_does_not_run_on_an_approval_of_its_edit(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    agent = make_agent(bank, model_config_json={"hooks": {"class_hooks": [
        f"{__name__}:PutsTheAskedArgumentsBack"]}})
    approvals.tool_of = partial(agent_tool, {agent.id: agent})
    task, rid = await _waiting(db, approvals, agent)
    await approvals.decide(rid, "approve", ALICE,
                           arguments={"amount": 40000, "vendor": "ACME"})
    result = await asyncio.wait_for(task, 10)
    assert bank.payments == []
    [blocked] = result.tool_events()
    assert blocked["allowed"] is False and blocked["blocked_by"] == "approval_check"
    assert "changed after they were approved" in blocked["observation"]


async def test_edited_arguments_that_differ_from_their_digest_do_not_run(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    task, rid = await _waiting(db, approvals, make_agent(bank))
    # A row written behind the service's back: approved for 40,000, but holding 4,000,000.
    approved = {"amount": 40000.0, "vendor": "ACME"}
    async with db.transaction() as s:
        await s.execute(update(ConfirmationRequestRow)
                        .where(ConfirmationRequestRow.id == rid)
                        .values(status="approved", responded_by="alice",
                                responded_at=await db.now(),
                                edited_args={"amount": 4_000_000.0, "vendor": "ACME"},
                                edited_args_sha256=args_digest(approved)))
    approvals.hub.wake(rid)
    result = await asyncio.wait_for(task, 10)
    assert bank.payments == []
    [blocked] = result.tool_events()
    assert blocked["allowed"] is False and blocked["blocked_by"] == "approval_gate"
    assert "not the ones the approver approved" in blocked["observation"]


async def test_an_edit_without_the_tools_schema_is_refused(
        db: Database, approvals: PersistentApprovals) -> None:
    # The service was given no way to find the tool (as for Claude Code's tools): fail closed.
    bank = Bank()
    task, rid = await _waiting(db, approvals, make_agent(bank))
    with pytest.raises(InvalidEdit, match="cannot be edited here"):
        await approvals.decide(rid, "approve", ALICE,
                               arguments={"amount": 1, "vendor": "ACME"})
    request = await approvals.store.get(rid)
    assert request is not None and request.pending
    await approvals.decide(rid, "reject", ALICE, message="not now")
    result = await asyncio.wait_for(task, 10)
    assert bank.payments == []
    assert result.tool_events()[0]["observation"].endswith("Message from alice: not now")
