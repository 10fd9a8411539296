"""A service (agent) identity acts for people and never decides (approvals/authority.py), on
real databases through the Python API: its decision, vote and standing rule are refused under
every approver scope, a stored grant of a user who became a service no longer counts, and
``acting_for`` names the call's initiator: a person for themself, a service for an enabled
person of its org, never for a service or someone elsewhere."""

from __future__ import annotations

import pytest

from hookgate import Agent, tool
from hookgate.approvals import authority
from hookgate.approvals.authority import NotActingFor, acting_for
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import NotEligible
from hookgate.approvals.persistent import PersistentApprovals, StillPending
from hookgate.approvals.rules import RuleBook, RuleDraft, RuleRefused
from hookgate.approvals.service import ApprovalAsk
from hookgate.storage.database import Database
from hookgate.storage.tables import Org, User
from hookgate.tools.tool import args_digest

pytestmark = pytest.mark.both_databases

SCOPES = ("initiator", "agent_owner", "org_members")


@tool(requires_confirmation=True, writes=True)
async def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor."""
    return f"paid {amount:g} to {vendor}"


def _agent(scope: str, owner: str = "olivia") -> Agent:
    return Agent(id="buyer", name="Buyer", instructions="", tools=[oa__purchase_pay],
                 org_id="acme", owner_user_id=owner,
                 confirmation_approver_scope=scope)  # type: ignore[arg-type]


async def _people(db: Database) -> None:
    async with db.transaction() as s:
        s.add_all([Org(id="acme", name="ACME"), Org(id="other", name="Other")])
        await s.flush()
        s.add_all([User(id="alice", org_id="acme", admin=True),
                   User(id="olivia", org_id="acme"),
                   User(id="gone", org_id="acme", disabled=True),
                   User(id="mallory", org_id="other"),
                   # An admin flag forced onto a service record: still never decides.
                   User(id="bot", org_id="acme", admin=True, service=True),
                   User(id="bot2", org_id="acme", service=True)])


def _ask(agent: Agent, user: str | None) -> ApprovalAsk:
    args = {"amount": 10, "vendor": "ACME"}
    return ApprovalAsk(agent=agent, run_id="run_1", tool_call_id="c1",
                       tool_name="oa__purchase_pay", args=args, args_sha256=args_digest(args),
                       user_id=user, org_id="acme")


@pytest.mark.parametrize("scope", SCOPES)
async def test_a_service_decides_nothing_under_any_scope(db: Database, scope: str) -> None:
    await _people(db)
    # The bot is the requester and the owner: every scope would let a person in its seat in.
    agent = _agent(scope, owner="bot")
    approvals = PersistentApprovals(db)
    with pytest.raises(StillPending) as waited:
        await approvals.request_and_wait(_ask(agent, "bot"), wait_s=0.05)
    request = waited.value.request
    for decision in ("approve", "reject"):
        for who in (Approver("bot", "acme", admin=True, service=True),
                    Approver("bot", "acme", admin=True)):  # the token said nothing: the record
            with pytest.raises(NotEligible, match="service \\(agent\\) identity"):
                await approvals.decide(request.id, decision, who)
    assert (await approvals.store.get(request.id)).pending  # type: ignore[union-attr]

    rules = RuleBook(db)
    draft = RuleDraft(agent_id="buyer", tool_name="oa__purchase_pay", scope="org")
    with pytest.raises(RuleRefused, match="service \\(agent\\) identity"):
        await rules.create(draft, _agent("org_members"), Approver("bot", "acme", admin=True))


async def test_a_stored_grant_of_a_user_who_became_a_service_stops_counting(
        db: Database) -> None:
    await _people(db)
    seat = authority.Seat.of_agent(_agent("org_members"), "acme", "alice")
    assert await authority.grant_refusal(db, "olivia", seat) is None
    async with db.transaction() as s:
        (await s.get(User, "olivia")).service = True  # type: ignore[union-attr]
    said = await authority.grant_refusal(db, "olivia", seat)
    assert said is not None and "service (agent) identity" in said


async def test_acting_for_names_a_person_of_the_org_or_nobody(db: Database) -> None:
    await _people(db)
    # A person acts for themself, and for nobody else.
    assert await acting_for(db, "alice", "acme", False, None) == "alice"
    assert await acting_for(db, "alice", "acme", False, "alice") == "alice"
    with pytest.raises(NotActingFor, match="only a service identity"):
        await acting_for(db, "alice", "acme", False, "olivia")
    # A service acts for an enabled person of its org, or for nobody.
    assert await acting_for(db, "bot", "acme", True, "olivia") == "olivia"
    assert await acting_for(db, "bot", "acme", True, None) is None
    for named, said in (("mallory", "not a user of org 'acme'"),
                        ("nobody", "not a user of org 'acme'"),
                        ("gone", "disabled"),
                        ("bot2", "service identity"),
                        ("bot", "service identity")):
        with pytest.raises(NotActingFor, match=said):
            await acting_for(db, "bot", "acme", True, named)


async def test_the_people_an_escalation_reaches_are_no_services(db: Database) -> None:
    from hookgate.storage import people

    await _people(db)
    assert await people.enabled_users(db, "acme") == ["alice", "olivia"]
    assert await people.enabled_users(db, "acme", admins_only=True) == ["alice"]
