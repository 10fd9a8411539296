"""Who may decide what, decided on the call that will run and on the people as they are now
(approvals/authority.py), through the Python API on real databases: an approver's edit that
raises the amount across a quorum threshold never runs on one approval nor as a
self-approval; a vote, a rule and an escalation stop counting once their person moved org,
was disabled or lost their token — and a suspended rule works again once an admin enables
it."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from sqlalchemy import update

from hookgate import Agent, tool
from hookgate.approvals.authority import Seat, refusal, requirement_of_run
from hookgate.approvals.edits import agent_tool
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import EditNeedsMore, InvalidEdit, NotEligible
from hookgate.approvals.persistent import PersistentApprovals, StillPending
from hookgate.approvals.quorum import QuorumRule, progress_text
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.rules import RuleBook, RuleDraft, RuleRefused
from hookgate.approvals.service import ApprovalAsk
from hookgate.storage.database import Database
from hookgate.storage.tables import ConfirmationRequestRow, Org, User
from hookgate.storage.users import revoke_token, token_digest
from hookgate.tools.tool import args_digest

pytestmark = pytest.mark.both_databases

ALICE, BOB, OLIVIA = (Approver(u, "acme") for u in ("alice", "bob", "olivia"))
ADMIN = Approver("alice", "acme", admin=True)


@tool(requires_confirmation=True, writes=True)
async def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor."""
    return f"paid {amount:g} to {vendor}"


def _buyer(*, self_ok: bool = True) -> Agent:
    """Above 500,000: two distinct approvers and never the requester."""
    return Agent(id="buyer", name="Buyer", instructions="", tools=[oa__purchase_pay],
                 org_id="acme", owner_user_id="olivia",
                 confirmation_approver_scope="org_members", allow_self_approval=self_ok,
                 approval_quorum=(QuorumRule.parse("oa__purchase_pay",
                                                   "args.amount > 500000", 2, False),))


def _ask(agent: Agent, amount: float, call: str = "c1", user: str = "alice") -> ApprovalAsk:
    args = {"amount": amount, "vendor": "ACME"}
    return ApprovalAsk(agent=agent, run_id=f"run_{call}", tool_call_id=call,
                       tool_name="oa__purchase_pay", args=args, args_sha256=args_digest(args),
                       user_id=user, org_id="acme")


async def _people(db: Database) -> None:
    async with db.transaction() as s:
        s.add_all([Org(id="acme"), Org(id="other")])
    async with db.transaction() as s:
        s.add_all([User(id=u, org_id="acme", admin=u == "alice",
                         token_sha256=token_digest(f"tok-{u}"))
                   for u in ("alice", "bob", "olivia", "carol")])


async def _move(db: Database, user: str, *, org: str | None = None,
                disabled: bool | None = None) -> None:
    values: dict[str, Any] = {}
    if org is not None:
        values["org_id"] = org
    if disabled is not None:
        values["disabled"] = disabled
    async with db.transaction() as s:
        await s.execute(update(User).where(User.id == user).values(**values))


async def _pending(approvals: PersistentApprovals, ask: ApprovalAsk) -> ConfirmationRequest:
    """The request of ``ask``, created and left pending (nobody decided yet)."""
    with pytest.raises(StillPending) as waited:
        await approvals.request_and_wait(ask, wait_s=0.05)
    return waited.value.request


def _service(db: Database, agent: Agent) -> PersistentApprovals:
    approvals = PersistentApprovals(db)
    approvals.tool_of = partial(agent_tool, {agent.id: agent})
    return approvals


async def test_edit_that_raises_the_amount_over_the_quorum_never_runs_on_one_approval(
        db: Database) -> None:
    await _people(db)
    agent = _buyer()
    approvals = _service(db, agent)
    asked = await _pending(approvals, _ask(agent, 60000))
    assert (asked.approvals_required, asked.allow_self_approval) == (1, True)
    raised = {"amount": 600000, "vendor": "ACME"}
    # Not by another approver (the edited call needs two) ...
    with pytest.raises(EditNeedsMore, match="needs 2 distinct approvals"):
        await approvals.decide(asked.id, "approve", BOB, arguments=raised)
    # ... and not as a self-approval by the requester.
    with pytest.raises(EditNeedsMore, match="the edit raises what this call needs"):
        await approvals.decide(asked.id, "approve", ALICE, arguments=raised)
    still = await approvals.store.get(asked.id)
    assert still is not None and still.pending and still.edited_args is None
    assert still.approvals == ()  # nothing was counted either
    # An edit that lowers the amount (or keeps the requirement) still works, by anyone.
    done = await approvals.decide(asked.id, "approve", ALICE,
                                  arguments={"amount": 40000, "vendor": "ACME"})
    assert done.status == "approved" and done.edited_args == {"amount": 40000.0,
                                                              "vendor": "ACME"}


async def test_edit_that_brings_four_eyes_is_refused_to_the_requester_only(
        db: Database) -> None:
    await _people(db)
    agent = Agent(id="buyer", name="Buyer", instructions="", tools=[oa__purchase_pay],
                  org_id="acme", confirmation_approver_scope="org_members",
                  approval_quorum=(QuorumRule.parse("oa__purchase_pay",
                                                    "args.vendor == 'Mallory'", 1, False),))
    approvals = _service(db, agent)
    asked = await _pending(approvals, _ask(agent, 100))
    to_mallory = {"amount": 100, "vendor": "Mallory"}
    with pytest.raises(EditNeedsMore, match="four eyes"):
        await approvals.decide(asked.id, "approve", ALICE, arguments=to_mallory)
    done = await approvals.decide(asked.id, "approve", BOB, arguments=to_mallory)
    assert done.status == "approved" and done.responded_by == "bob"


async def test_an_edit_of_an_agent_this_service_never_asked_for_is_refused(
        db: Database) -> None:
    await _people(db)
    agent = _buyer()
    asking = _service(db, agent)
    asked = await _pending(asking, _ask(agent, 60000))
    elsewhere = _service(db, agent)  # knows the tool's schema, but not the agent's quorum
    with pytest.raises(InvalidEdit, match="cannot be judged"):
        await elsewhere.decide(asked.id, "approve", BOB,
                               arguments={"amount": 40000, "vendor": "ACME"})


async def test_hostile_edits_fail_closed(db: Database) -> None:
    await _people(db)
    agent = _buyer()
    approvals = _service(db, agent)
    asked = await _pending(approvals, _ask(agent, 60000))
    for hostile in ({"amount": float("nan"), "vendor": "ACME"},
                    {"amount": "600000", "vendor": "ACME"},
                    {"amount": 60000, "vendor": "AC\ud800ME"},
                    {"amount": 6e5, "vendor": "ACME"}):
        with pytest.raises(InvalidEdit):
            await approvals.decide(asked.id, "approve", BOB, arguments=hostile)
    still = await approvals.store.get(asked.id)
    assert still is not None and still.pending


async def test_a_vote_of_a_voter_who_moved_org_no_longer_counts(db: Database) -> None:
    await _people(db)
    agent = _buyer()
    approvals = _service(db, agent)
    big = await _pending(approvals, _ask(agent, 600000))
    assert big.approvals_required == 2
    first = await approvals.decide(big.id, "approve", BOB)
    assert progress_text(first) == "1 of 2 approvals (bob)"
    await _move(db, "bob", org="other")
    # Olivia's approval would make two, but bob no longer belongs to the request's org.
    second = await approvals.decide(big.id, "approve", OLIVIA)
    assert second.pending, second
    assert progress_text(second) == "1 of 2 approvals (olivia)"
    assert [d["user_id"] for d in second.discounted] == ["bob"]
    assert "not a member of org 'acme'" in second.discounted[0]["no_longer_counts"]
    shown = second.to_dict()["approvals"]
    assert (shown["count"], shown["required"]) == (1, 2)
    # The moved person cannot decide either, under the same check.
    with pytest.raises(NotEligible, match="not a member"):
        await approvals.decide(big.id, "reject", BOB)
    third = await approvals.decide(big.id, "approve", Approver("carol", "acme"))
    assert third.status == "approved" and third.responded_by == "carol"


async def test_a_voter_disabled_after_voting_shows_one_of_two_while_pending(
        db: Database) -> None:
    await _people(db)
    agent = _buyer()
    approvals = _service(db, agent)
    big = await _pending(approvals, _ask(agent, 600000))
    await approvals.decide(big.id, "approve", BOB)
    await _move(db, "bob", disabled=True)
    second = await approvals.decide(big.id, "approve", OLIVIA)
    assert second.pending and progress_text(second) == "1 of 2 approvals (olivia)"


async def test_a_person_is_read_from_their_current_record_not_from_the_caller(
        db: Database) -> None:
    await _people(db)
    agent = _buyer()
    approvals = _service(db, agent)
    asked = await _pending(approvals, _ask(agent, 60000))
    await _move(db, "bob", org="other")
    # The caller says bob is in acme; his record says otherwise.
    with pytest.raises(NotEligible, match="not a member of org 'acme'"):
        await approvals.decide(asked.id, "approve", BOB)


async def test_an_escalation_is_authorised_again_when_used(db: Database) -> None:
    await _people(db)
    agent = Agent(id="buyer", name="Buyer", instructions="", tools=[oa__purchase_pay],
                  org_id="acme", owner_user_id="olivia",
                  confirmation_approver_scope="agent_owner")
    approvals = _service(db, agent)
    asked = await _pending(approvals, _ask(agent, 100))
    async with db.transaction() as s:
        await s.execute(update(ConfirmationRequestRow)
                        .where(ConfirmationRequestRow.id == asked.id)
                        .values(escalated_to=["carol"]))
    await _move(db, "carol", org="other")
    with pytest.raises(NotEligible, match="not a member"):
        await approvals.decide(asked.id, "approve", Approver("carol", "acme"))
    await _move(db, "carol", org="acme")
    done = await approvals.decide(asked.id, "approve", Approver("carol", "acme"))
    assert done.status == "approved"


@pytest.mark.parametrize("how", ["moved org", "disabled", "token revoked"])
async def test_a_rule_whose_creator_lost_their_standing_stops_approving(
        db: Database, how: str) -> None:
    await _people(db)
    agent = _buyer()
    book = RuleBook(db)
    rule = await book.create(RuleDraft("buyer", "oa__purchase_pay", "org"), agent, BOB)
    assert await book.match(_ask(agent, 60000, "c1")) is not None
    if how == "moved org":
        await _move(db, "bob", org="other")
    elif how == "disabled":
        await _move(db, "bob", disabled=True)
    else:
        assert await revoke_token(db, "bob", by="alice")
    # A person is asked instead.
    assert await book.match(_ask(agent, 60000, "c2")) is None
    approvals = _service(db, agent)
    asked = await _pending(approvals, _ask(agent, 60000, "c3"))
    assert asked.pending
    if how == "token revoked":
        suspended = await book.get(rule.id, "acme")
        assert suspended.suspended_at is not None and not suspended.active()
        assert "the token of its creator 'bob' was revoked" in str(suspended.suspended_reason)
        assert [r.id for r in await book.list_for_org("acme", active_only=True)] == []
        with pytest.raises(RuleRefused, match="only an admin"):
            await book.enable(rule.id, OLIVIA)
        enabled = await book.enable(rule.id, ADMIN)
        assert enabled.active() and enabled.suspended_at is None
        # Bob is still an enabled member of acme (only his token is gone): it works again.
        assert await book.match(_ask(agent, 60000, "c4")) is not None
    else:
        await _move(db, "bob", org="acme", disabled=False)
        assert await book.match(_ask(agent, 60000, "c4")) is not None


async def test_a_rule_never_stands_in_for_an_edited_or_quorum_call(db: Database) -> None:
    await _people(db)
    agent = _buyer()
    book = RuleBook(db)
    await book.create(RuleDraft("buyer", "oa__purchase_pay", "org"), agent, BOB)
    assert await book.match(_ask(agent, 600000)) is None  # needs two people


def test_one_check_for_every_grant() -> None:
    """The same refusal for a live decision, a vote, a rule and an escalation."""
    seat = Seat("acme", "agent_owner", "alice", "olivia", ("carol",), False)
    from hookgate.approvals.authority import Person

    assert refusal(seat, Person("olivia", "acme")) is None
    assert refusal(seat, Person("carol", "acme")) is None
    assert "not a member" in str(refusal(seat, Person("carol", "other")))
    assert "disabled" in str(refusal(seat, Person("olivia", "acme", disabled=True)))
    assert "agent's owner" in str(refusal(seat, Person("bob", "acme")))
    four_eyes = Seat("acme", "org_members", "alice", None, (), False)
    assert "four eyes" in str(refusal(four_eyes, Person("alice", "acme")))
    assert refusal(four_eyes, Person("alice", "acme"), "reject") is None


def test_the_requirement_is_read_from_the_arguments_that_will_run() -> None:
    agent = _buyer()
    request = ConfirmationRequest.__new__(ConfirmationRequest)
    object.__setattr__(request, "tool_name", "oa__purchase_pay")
    object.__setattr__(request, "agent_id", "buyer")
    object.__setattr__(request, "requested_by", "alice")
    object.__setattr__(request, "org_id", "acme")
    small = requirement_of_run(agent, request, {"amount": 60000, "vendor": "ACME"})
    big = requirement_of_run(agent, request, {"amount": 600000, "vendor": "ACME"})
    broken = requirement_of_run(agent, request, {"amount": "lots", "vendor": "ACME"})
    assert (small.approvals_required, small.allow_self_approval) == (1, True)
    assert (big.approvals_required, big.allow_self_approval) == (2, False)
    assert broken.approvals_required == 2  # cannot be judged: the strict side
