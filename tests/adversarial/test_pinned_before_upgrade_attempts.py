"""A request made before the upgrade to RFC 8785 digests and decided after it: its stored
digest is the earlier form's, so it cannot authorise the call. The call fails closed with a
message that says why (not a silent mismatch), on SQLite and PostgreSQL; a fresh ask of
the same call is then pinned the new way and runs once approved."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import update

from hookgate import ReActEngine, ScriptedLLM
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.hooks.services import HookServices
from hookgate.storage.database import Database
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.tables import ConfirmationRequestRow
from hookgate.tools.tool import args_digest, legacy_args_digest
from tests.adversarial.conftest import Tally
from tests.approvals.test_persistent_gate import ALICE, Bank, make_agent, next_event, start_run

pytestmark = pytest.mark.both_databases
ARGS: dict[str, Any] = {"amount": 60_000.0, "vendor": "Zoë & Co"}


def engine(db: Database, approvals: PersistentApprovals, calls: int) -> ReActEngine:
    turns: list[dict[str, Any]] = [{"tool_calls": [{"name": "oa__purchase_pay", "args": ARGS}]}
                                   for _ in range(calls)]
    return ReActEngine(ScriptedLLM([*turns, {"answer": "done"}]),
                       services=HookServices(approvals=approvals, database=db),
                       ledger=DatabaseLedger(db))


async def stored_the_old_way(db: Database, request_id: str) -> None:
    """What a request row written before the upgrade holds: the earlier digest."""
    old = legacy_args_digest(ARGS)
    assert old is not None and old != args_digest(ARGS)  # 60000.0 is "60000" in RFC 8785
    async with db.transaction() as s:
        await s.execute(update(ConfirmationRequestRow).where(
            ConfirmationRequestRow.id == request_id).values(args_sha256=old))


async def test_an_approval_of_a_request_pinned_before_the_upgrade_runs_nothing_and_says_why(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    bank = Bank()
    task, events = await start_run(engine(db, approvals, 1), make_agent(bank))
    pending = await next_event(events, "confirmation_pending")
    await stored_the_old_way(db, pending.data["request_id"])

    await approvals.decide(pending.data["request_id"], "approve", ALICE)
    result = await asyncio.wait_for(task, 10)

    attempt.record("approval pinned with the pre-RFC-8785 digest", bool(bank.payments))
    assert bank.payments == []
    [call] = result.tool_events()
    assert call["allowed"] is False
    assert "made before this hookgate changed how it pins approved arguments" in (
        call["observation"])
    assert "call the tool again to ask for a new approval" in call["observation"]


async def test_after_the_refusal_the_same_call_asked_again_runs_once_approved(
        db: Database, approvals: PersistentApprovals) -> None:
    bank = Bank()
    task, events = await start_run(engine(db, approvals, 2), make_agent(bank))
    first = await next_event(events, "confirmation_pending")
    await stored_the_old_way(db, first.data["request_id"])
    await approvals.decide(first.data["request_id"], "approve", ALICE)

    second = await next_event(events, "confirmation_pending")
    assert second.data["request_id"] != first.data["request_id"]
    request = await approvals.store.get(second.data["request_id"])
    assert request is not None and request.args_sha256 == args_digest(ARGS)
    await approvals.decide(second.data["request_id"], "approve", ALICE)
    result = await asyncio.wait_for(task, 10)

    assert result.status == "completed"
    assert bank.payments == [{"amount": 60_000.0, "vendor": "Zoë & Co"}]
