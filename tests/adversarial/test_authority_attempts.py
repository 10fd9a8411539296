"""Attempts to get a payment through on less authority than the call that runs needs: an
approver raising a waiting 60,000 payment to 600,000 (two approvers, four eyes) by editing
it — as another approver, as its requester, with look-alike and hostile numbers — a quorum
completed by a vote whose voter moved org, and a standing rule whose creator's token was
revoked. On a real engine run over SQLite and PostgreSQL, none pays more than asked."""

from __future__ import annotations

import asyncio
import math
from functools import partial
from typing import Any

import pytest
from sqlalchemy import update

from hookgate.approvals.edits import agent_tool
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import ApprovalError
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.quorum import QuorumRule
from hookgate.approvals.rules import RuleDraft
from hookgate.storage.database import Database
from hookgate.storage.tables import Org, User
from hookgate.storage.users import revoke_token, token_digest
from tests.adversarial.conftest import Tally
from tests.approvals.test_persistent_gate import (
    Bank,
    engine_for,
    make_agent,
    next_event,
    pay_script,
    start_run,
)

pytestmark = pytest.mark.both_databases

ALICE, BOB, OLIVIA = (Approver(u, "acme") for u in ("alice", "bob", "olivia"))
THRESHOLD = {"confirmation_approver_scope": "org_members",
             "approval_quorum": (QuorumRule.parse("oa__purchase_pay", "args.amount > 500000",
                                                  2, False),)}
RAISES: list[Any] = [
    {"amount": 600000, "vendor": "ACME"},
    {"amount": 600000.0, "vendor": "ACME"},
    {"amount": "600000", "vendor": "ACME"},
    {"amount": 6e5, "vendor": "ACME"},
    {"amount": 500000.01, "vendor": "ACME"},
    {"amount": math.inf, "vendor": "ACME"},
    {"amount": math.nan, "vendor": "ACME"},
    {"amount": 10**30, "vendor": "ACME"},
    {"amount": 600000, "vendor": "ACME", "amount\u200b": 1},
    {"amount": 600000, "vendor": "AC\ud800ME"},
]


async def _people(db: Database) -> None:
    async with db.transaction() as s:
        s.add_all([Org(id="acme"), Org(id="other")])
    async with db.transaction() as s:
        s.add_all([User(id=u, org_id="acme", token_sha256=token_digest(f"t-{u}"))
                   for u in ("alice", "bob", "olivia", "carol")])


async def test_raising_a_waiting_payment_by_edit_never_pays_on_one_approval(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    await _people(db)
    bank = Bank()
    agent = make_agent(bank, **THRESHOLD)
    approvals.tool_of = partial(agent_tool, {agent.id: agent})
    task, events = await start_run(engine_for(db, approvals, pay_script()), agent)
    rid = (await next_event(events, "confirmation_pending")).data["request_id"]
    for n, raised in enumerate(RAISES):
        for who in (BOB, ALICE):
            try:
                done = await approvals.decide(rid, "approve", who, arguments=raised)
            except ApprovalError:
                through = False
            else:
                through = done.status == "approved"
            attempt.record(f"edit #{n} raising 60,000 by {who.user_id}", through)
            assert not through, (raised, who)
    await approvals.decide(rid, "reject", OLIVIA, reason="not like this")
    result = await asyncio.wait_for(task, 10)
    assert result.status == "completed" and bank.payments == []


async def test_a_moved_voters_vote_does_not_complete_the_quorum(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    await _people(db)
    bank = Bank()
    agent = make_agent(bank, **THRESHOLD)
    task, events = await start_run(engine_for(db, approvals, pay_script(600000)), agent)
    rid = (await next_event(events, "confirmation_pending")).data["request_id"]
    await approvals.decide(rid, "approve", BOB)
    async with db.transaction() as s:
        await s.execute(update(User).where(User.id == "bob").values(org_id="other"))
    after = await approvals.decide(rid, "approve", OLIVIA)
    attempt.record("quorum completed by a vote whose voter moved org", not after.pending)
    assert after.pending and bank.payments == []
    await approvals.decide(rid, "reject", ALICE)
    await asyncio.wait_for(task, 10)
    assert bank.payments == []


async def test_a_rule_of_a_revoked_creator_approves_nothing(
        db: Database, approvals: PersistentApprovals, attempt: Tally) -> None:
    await _people(db)
    bank = Bank()
    agent = make_agent(bank, **THRESHOLD)
    await approvals.rules.create(RuleDraft("buyer", "oa__purchase_pay", "org"), agent, BOB)
    assert await revoke_token(db, "bob")
    task, events = await start_run(engine_for(db, approvals, pay_script()), agent)
    pending = await next_event(events, "confirmation_pending")  # a person is asked
    attempt.record("standing rule of a creator whose token was revoked", bank.payments != [])
    assert bank.payments == []
    await approvals.decide(pending.data["request_id"], "reject", OLIVIA)
    await asyncio.wait_for(task, 10)
    assert bank.payments == []
