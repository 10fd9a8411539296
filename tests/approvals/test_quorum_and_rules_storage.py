"""Quorum votes and standing-rule matching on real databases: approvers deciding at the
same moment from two engines (two processes' connection pools) are counted one by one, and
a rule's constraint is judged fail-closed over hostile arguments (NaN, strings for
numbers), other agents, other runs and look-alike names."""

from __future__ import annotations

import asyncio
import math
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from hookgate import Agent, tool
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import AlreadyDecided
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.quorum import AlreadyVoted
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.rules import RuleBook, RuleDraft
from hookgate.approvals.service import ApprovalAsk
from hookgate.storage.database import Database
from hookgate.storage.tables import ApprovalVoteRow, Org, User
from hookgate.tools.arguments import ArgumentsRefused
from hookgate.tools.tool import Tool, args_digest

pytestmark = pytest.mark.both_databases


async def _request(approvals: PersistentApprovals, n: int, required: int = 2
                   ) -> ConfirmationRequest:
    now = await approvals.db.now()
    args = {"amount": 600000 + n, "vendor": "ACME"}
    request, created = await approvals.store.create(
        run_id=f"run_{n}", tool_call_id="call", agent_id="buyer", requested_by="alice",
        org_id="acme", mode="inline", channel_id=None, approver_scope="org_members",
        agent_owner_id=None, tool_name="oa__purchase_pay", args=args,
        args_sha256=args_digest(args), created_at=now, expires_at=now + timedelta(hours=1),
        approvals_required=required, allow_self_approval=False)
    assert created
    return request


async def test_simultaneous_approvers_from_two_pools_reach_the_quorum_exactly(
        database_url: str, db: Database) -> None:
    other = Database(database_url)  # a second engine: another process's connections
    try:
        here, there = PersistentApprovals(db), PersistentApprovals(other)
        requests = [await _request(here, n) for n in range(8)]
        for request in requests:
            results = await asyncio.gather(
                here.decide(request.id, "approve", Approver("bob", "acme")),
                there.decide(request.id, "approve", Approver("olivia", "acme")),
                return_exceptions=True)
            assert not [r for r in results if isinstance(r, BaseException)], results
            final = await here.store.get(request.id)
            assert final is not None and final.status == "approved", final
            assert sorted(a["user_id"] for a in final.approvals) == ["bob", "olivia"]
        # Three at once for two places: two count, the third finds it decided.
        three = await _request(here, 99)
        results = await asyncio.gather(
            here.decide(three.id, "approve", Approver("bob", "acme")),
            there.decide(three.id, "approve", Approver("olivia", "acme")),
            there.decide(three.id, "approve", Approver("carol", "acme")),
            return_exceptions=True)
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(refused) == 1 and isinstance(refused[0], AlreadyDecided), results
        final = await here.store.get(three.id)
        assert final is not None and final.status == "approved"
        assert len(final.approvals) == 2
        async with db.session() as s:
            votes = (await s.execute(select(func.count()).select_from(ApprovalVoteRow).where(
                ApprovalVoteRow.request_id == three.id))).scalar_one()
        assert votes == 2
    finally:
        await other.dispose()


async def test_one_person_counts_once_even_at_the_same_moment(db: Database) -> None:
    approvals = PersistentApprovals(db)
    request = await _request(approvals, 1)
    results = await asyncio.gather(
        *(approvals.decide(request.id, "approve", Approver("bob", "acme")) for _ in range(3)),
        return_exceptions=True)
    assert sum(isinstance(r, AlreadyVoted) for r in results) == 2, results
    final = await approvals.store.get(request.id)
    assert final is not None and final.pending and len(final.approvals) == 1


async def test_an_approver_towards_the_quorum_cannot_then_reject_alone(db: Database) -> None:
    # The final decision writes its vote in the compare-and-set's own statement on
    # PostgreSQL (decision record 0021): a second vote of one person is refused there, and
    # the rejection it came with is not made.
    approvals = PersistentApprovals(db)
    request = await _request(approvals, 7)
    await approvals.decide(request.id, "approve", Approver("bob", "acme"))
    with pytest.raises(AlreadyVoted, match="one person counts once"):
        await approvals.decide(request.id, "reject", Approver("bob", "acme"), reason="no")
    after = await approvals.store.get(request.id)
    assert after is not None and after.pending and after.responded_by is None
    assert [a["user_id"] for a in after.approvals] == ["bob"]
    async with db.session() as s:
        votes = (await s.execute(select(func.count()).select_from(ApprovalVoteRow).where(
            ApprovalVoteRow.request_id == request.id))).scalar_one()
    assert votes == 1
    rejected = await approvals.decide(request.id, "reject", Approver("carol", "acme"))
    assert (rejected.status, rejected.responded_by) == ("rejected", "carol")


async def test_an_approver_disabled_after_voting_no_longer_counts(db: Database) -> None:
    approvals = PersistentApprovals(db)
    request = await _request(approvals, 2)
    async with db.transaction() as s:
        s.add(Org(id="acme"))
    async with db.transaction() as s:
        s.add_all([User(id="bob", org_id="acme"), User(id="olivia", org_id="acme"),
                   User(id="carol", org_id="acme")])
    first = await approvals.decide(request.id, "approve", Approver("bob", "acme"))
    assert first.pending and len(first.approvals) == 1
    async with db.transaction() as s:
        bob = await s.get(User, "bob")
        assert bob is not None
        bob.disabled = True
    # Olivia's approval would make two, but bob no longer stands behind the call.
    second = await approvals.decide(request.id, "approve", Approver("olivia", "acme"))
    assert second.pending, second
    third = await approvals.decide(request.id, "approve", Approver("carol", "acme"))
    assert third.status == "approved" and third.responded_by == "carol"


def _agent(*tools: Tool, agent_id: str = "buyer") -> Agent:
    return Agent(id=agent_id, name=agent_id, instructions="", tools=list(tools),
                 org_id="acme", owner_user_id="olivia",
                 confirmation_approver_scope="org_members")


def _raw_tool() -> Tool:
    # A raw JSON-schema tool (as MCP and Claude Code tools are): strings stay strings.
    async def pay(**_: Any) -> str:
        return "paid"

    return Tool(name="oa__purchase_pay", description="Pay.", parameters={"type": "object"},
                _fn=pay, requires_confirmation=True)


def _ask(agent: Agent, args: dict[str, Any], *, run_id: str = "run_1",
         user: str = "alice", tool_name: str = "oa__purchase_pay") -> ApprovalAsk:
    try:
        digest = args_digest(args)
    except ArgumentsRefused:  # NaN, ±inf: no digest pins them (the boundary refuses them)
        digest = "unpinnable"
    return ApprovalAsk(agent=agent, run_id=run_id, tool_call_id="c1", tool_name=tool_name,
                       args=args, args_sha256=digest, user_id=user, org_id="acme")


async def test_constraints_over_hostile_arguments_fail_closed(db: Database) -> None:
    book = RuleBook(db)
    agent = _agent(_raw_tool())
    await book.create(RuleDraft("buyer", "oa__purchase_pay", "org",
                                when="not (args.amount > 80000)"), agent,
                      Approver("bob", "acme"))
    assert await book.match(_ask(agent, {"amount": 70000})) is not None
    # NaN is "not > 80000", but a constraint is never judged over a number that is none.
    for hostile in ({"amount": math.nan}, {"amount": math.inf}, {"nested": [math.nan]}):
        assert await book.match(_ask(agent, hostile)) is None, hostile
    # Strings for numbers make the comparison fail: ask.
    assert await book.match(_ask(agent, {"amount": "70000"})) is None
    assert await book.match(_ask(agent, {})) is None  # no amount: an error, so ask
    # Exact names only, whichever agent asks.
    assert await book.match(_ask(agent, {"amount": 1}, tool_name="oa__purchase_pay ")) is None
    other = _agent(_raw_tool(), agent_id="seller")
    assert await book.match(_ask(other, {"amount": 1})) is None
    assert (await book.list_for_org("acme"))[0].uses == 1


async def test_scope_four_eyes_and_a_disabled_creator(db: Database) -> None:
    book = RuleBook(db)
    agent = _agent(_raw_tool())
    bob = Approver("bob", "acme")
    await book.create(RuleDraft("buyer", "oa__purchase_pay", "run", run_id="run_1",
                                user_id="alice", from_request_id="cr_x"), agent, bob)
    assert await book.match(_ask(agent, {"amount": 1})) is not None
    assert await book.match(_ask(agent, {"amount": 1}, run_id="run_2")) is None
    # A rule bob made for himself does not approve his own calls under four eyes.
    four_eyes = Agent(id="buyer", name="b", instructions="", tools=agent.tools,
                      org_id="acme", confirmation_approver_scope="org_members",
                      allow_self_approval=False)
    await book.create(RuleDraft("buyer", "oa__purchase_pay", "agent_user", user_id="bob"),
                      agent, bob)  # made before the agent turned four eyes on
    assert await book.match(_ask(four_eyes, {"amount": 1}, run_id="run_9", user="bob")) is None
    assert await book.match(_ask(agent, {"amount": 1}, run_id="run_9", user="bob")) is not None
    await book.create(RuleDraft("buyer", "oa__purchase_pay", "agent_user", user_id="bob"),
                      agent, Approver("olivia", "acme"))
    assert await book.match(_ask(four_eyes, {"amount": 1}, run_id="run_9", user="bob")
                            ) is not None
    assert await book.match(_ask(agent, {"amount": 1}, run_id="run_9", user="carol")) is None
    # A disabled creator's rules stop approving.
    async with db.transaction() as s:
        s.add(Org(id="acme"))
    async with db.transaction() as s:
        s.add(User(id="olivia", org_id="acme", disabled=True))
    assert await book.match(_ask(four_eyes, {"amount": 1}, run_id="run_9", user="bob")) is None


async def test_typed_tool_arguments_are_what_the_rule_judges(db: Database) -> None:
    @tool(requires_confirmation=True)
    async def oa__purchase_pay(amount: float, vendor: str) -> str:
        """Pay."""
        return "paid"

    book = RuleBook(db)
    agent = _agent(oa__purchase_pay)
    await book.create(RuleDraft("buyer", "oa__purchase_pay", "org",
                                when='args.vendor == "ACME" and args.amount <= 80000'),
                      agent, Approver("bob", "acme"))
    validated = oa__purchase_pay.validate({"amount": "70000", "vendor": "ACME"})
    assert await book.match(_ask(agent, validated)) is not None
    assert await book.match(_ask(agent, oa__purchase_pay.validate(
        {"amount": 80000.5, "vendor": "ACME"}))) is None
    assert await book.match(_ask(agent, oa__purchase_pay.validate(
        {"amount": 1, "vendor": "acme"}))) is None
