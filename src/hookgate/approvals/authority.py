"""Who may decide what, in one place: the requirement of the call that will run (quorum, four
eyes), whether a person may decide a request now, whether a stored grant (a standing rule, a
quorum vote, an escalation) still counts now, and whom a call acts for. Every path asks here
at the moment of use, and people are read from the current user records, never from what a
grant stored. A service (agent) identity acts for people and never decides, under any scope.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from hookgate.approvals.eligibility import Approver
from hookgate.approvals.records import ConfirmationRequest
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.matching import not_evaluated, selects
from hookgate.storage import oidc_sessions
from hookgate.storage import people as user_records
from hookgate.storage.database import Database
from hookgate.storage.people import PersonRecord
from hookgate.storage.transaction import SessionTransaction

if TYPE_CHECKING:
    from hookgate.agent import Agent
    from hookgate.approvals.service import ApprovalAsk

APPROVER_SCOPES = ("initiator", "agent_owner", "org_members")


# -- (a) what a call needs ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Requirement:
    """What a request needs before it counts as approved, and in words why."""

    approvals_required: int = 1
    allow_self_approval: bool = True
    reasons: tuple[str, ...] = ()


def requirement_for(ask: ApprovalAsk) -> Requirement:
    """The requirement of ``ask``'s call as asked (see `requirement_of`)."""
    return requirement_of(ask.agent, ask.condition_context())


def requirement_of_run(agent: Agent, request: ConfirmationRequest,
                       args: Mapping[str, Any]) -> Requirement:
    """The requirement of ``request``'s call with the arguments that will run (an approver's
    edit): the same rules, read against those arguments."""
    ctx = HookContext(hook_point=HookPoint.PRE_TOOL_USE, tool_name=request.tool_name,
                      tool_args=dict(args), agent_id=request.agent_id,
                      user_id=request.requested_by, metadata={"org_id": request.org_id})
    return requirement_of(agent, ctx)


def requirement_of(agent: Agent, ctx: HookContext) -> Requirement:
    """The agent's ``allow_self_approval`` and every quorum rule that picks this call (the
    strictest wins). A rule whose ``when`` cannot be evaluated picks the call: fail closed."""
    needed, self_ok, reasons = 1, agent.allow_self_approval, []
    if not agent.allow_self_approval:
        reasons.append(f"four eyes: the requester may not approve their own call (agent "
                       f"'{agent.id}' has allow_self_approval: false)")
    for rule in agent.approval_quorum:
        picked, error = selects(rule.matcher, rule.when, ctx)
        if not picked:
            continue
        failed = f" ({not_evaluated(error)})" if error else ""
        if rule.approvals_required > needed:
            needed = rule.approvals_required
            reasons.append(f"{needed} distinct people must approve ({rule.describe()}"
                           f"{failed})")
        if rule.allow_self_approval is False and self_ok:
            self_ok = False
            reasons.append(f"four eyes: the requester may not approve their own call "
                           f"({rule.describe()}{failed})")
    return Requirement(needed, self_ok, tuple(reasons))


def edit_refusal(request: ConfirmationRequest, who: Approver, edited: Requirement
                 ) -> str | None:
    """Why ``who``'s single approval may not let the edited call run (None when it may): an
    edit that raises the requirement above what this one approval meets is refused, so the
    edited call never runs on fewer approvals than it needs, nor as a self-approval."""
    have = request.approvals_required
    if edited.approvals_required > have:
        why = "; ".join(edited.reasons) or "the agent's quorum rules"
        return (f"the edit raises what this call needs: the edited call needs "
                f"{edited.approvals_required} distinct approvals, the request asked for "
                f"{have} ({why}); approve or reject the call as asked, and let the agent "
                "ask again for the edited one")
    if (not edited.allow_self_approval and request.requested_by is not None
            and who.user_id == request.requested_by):
        return (f"the edit brings four eyes: '{who.user_id}' requested this call and may "
                "not approve the edited one; another eligible person must")
    return None


# -- (b) whether a person may decide now --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seat:
    """Whom a decision on one call is for: its org, approver scope, requester, agent owner,
    the people an escalation added, and whether its requester may approve it."""

    org_id: str | None
    approver_scope: str
    requested_by: str | None
    agent_owner_id: str | None
    escalated_to: tuple[str, ...] = ()
    allow_self_approval: bool = True
    #: The agent's ``approver_groups``: a person in none of them may not decide (empty: no
    #: such restriction); checked with the groups read at the moment of use.
    approver_groups: tuple[str, ...] = ()

    @classmethod
    def of_request(cls, request: ConfirmationRequest,
                   approver_groups: tuple[str, ...] = ()) -> Seat:
        return cls(request.org_id, request.approver_scope, request.requested_by,
                   request.agent_owner_id, request.escalated_to, request.allow_self_approval,
                   approver_groups)

    @classmethod
    def of_agent(cls, agent: Agent, org_id: str | None, requester: str | None,
                 need: Requirement | None = None) -> Seat:
        """The seat of a call of ``agent`` by ``requester`` (None: anyone's call)."""
        self_ok = agent.allow_self_approval if need is None else need.allow_self_approval
        return cls(org_id, agent.confirmation_approver_scope, requester,
                   agent.owner_user_id, (), self_ok, agent.approver_groups)


@dataclass(frozen=True, slots=True)
class Person:
    """A person as the user records say now (``known`` False: no record, the library's
    approvals without a users table; then the org they were given is taken)."""

    user_id: str
    org_id: str | None
    disabled: bool = False
    known: bool = False
    #: A service (agent) identity: never decides, votes or creates a standing rule.
    service: bool = False


def service_refusal(user_id: str) -> str:
    """Why a service identity may not decide (the one wording, for every path)."""
    return (f"'{user_id}' is a service (agent) identity: it acts for people and never "
            "approves, rejects, votes or creates a standing rule; a person's token decides")


def refusal(seat: Seat, person: Person, decision: str = "approve") -> str | None:
    """THE eligibility check: why ``person`` may not make ``decision`` on a call of ``seat``
    (None when they may). Live decisions, votes, rules and escalations all come here."""
    if person.service:
        return service_refusal(person.user_id)
    if person.org_id != seat.org_id:
        return f"user '{person.user_id}' is not a member of org '{seat.org_id}'"
    if person.disabled:
        return f"user '{person.user_id}' is disabled"
    if seat.approver_scope not in APPROVER_SCOPES:
        return f"unknown approver scope '{seat.approver_scope}'"
    escalated = person.user_id in seat.escalated_to
    if not escalated and seat.approver_scope == "initiator" and (
            person.user_id != seat.requested_by):
        return (f"only the user who started the run ('{seat.requested_by}') may decide "
                "this request")
    if not escalated and seat.approver_scope == "agent_owner" and (
            person.user_id != seat.agent_owner_id):
        return f"only the agent's owner ('{seat.agent_owner_id}') may decide this request"
    if (decision == "approve" and not seat.allow_self_approval
            and seat.requested_by is not None and person.user_id == seat.requested_by):
        return (f"four eyes: '{person.user_id}' requested this call and may not approve it "
                "(allow_self_approval: false); another eligible person must")
    return None


def group_refusal(user_id: str, approver_groups: tuple[str, ...],
                  groups: tuple[str, ...] | None) -> str | None:
    """Why ``user_id``, in the provider's ``groups`` (None: no provider identity), is in
    none of ``approver_groups`` (None when they are, or when there are none)."""
    if not approver_groups:
        return None
    wanted = ", ".join(approver_groups)
    if groups is None:
        return (f"'{user_id}' does not sign in through the identity provider, so is in none "
                f"of the agent's approver groups ({wanted}); only people in them decide")
    if set(groups) & set(approver_groups):
        return None
    return (f"'{user_id}' is in none of the agent's approver groups ({wanted}), as the "
            "identity provider said at their last sign-in or re-check")


async def groups_refusal(db: Database, user_id: str, seat: Seat) -> str | None:
    """`group_refusal` with ``user_id``'s groups read now (one query; none when the seat
    names no approver groups)."""
    if not seat.approver_groups:
        return None
    return group_refusal(user_id, seat.approver_groups,
                         await oidc_sessions.groups_of(db, user_id))


async def people(tx: SessionTransaction, user_ids: Iterable[str]) -> dict[str, PersonRecord]:
    """The current user records of ``user_ids`` (those that exist), read in ``tx``."""
    return await user_records.read_people(tx, user_ids)


def person(user_id: str, records: Mapping[str, PersonRecord], fallback_org: str | None
           ) -> Person:
    """``user_id`` as the records say now; ``fallback_org`` when no record exists."""
    record = records.get(user_id)
    if record is None:
        return Person(user_id, fallback_org)
    return Person(user_id, record.org_id, bool(record.disabled), True, bool(record.service))


async def current(db: Database, who: Approver) -> Approver:
    """``who`` with the org and admin flag of their current user record (as given when none)."""
    records = await user_records.people(db, [who.user_id])
    record = records.get(who.user_id)
    if record is None:
        return who
    return replace(who, org_id=record.org_id, admin=bool(record.admin),
                   service=who.service or bool(record.service))


async def decider_refusal(db: Database, request: ConfirmationRequest, who: Approver,
                          decision: str, *, approver_groups: tuple[str, ...]
                          ) -> str | None:
    """Why ``who`` may not make ``decision`` on ``request`` now, by their current record
    and (when the agent has ``approver_groups``) their provider groups as last read."""
    if who.service:
        return service_refusal(who.user_id)
    records = await user_records.people(db, [who.user_id])
    seat = Seat.of_request(request, approver_groups)
    why = refusal(seat, person(who.user_id, records, who.org_id), decision)
    return why if why is not None else await groups_refusal(db, who.user_id, seat)


def may_decide(request: ConfirmationRequest, who: Approver, decision: str) -> bool:
    """For showing (``can_decide``, ``can_approve``): ``who`` as the caller's signed-in
    record gives them; the decision itself is checked again by `decider_refusal`."""
    return refusal(Seat.of_request(request), Person(who.user_id, who.org_id,
                                                    service=who.service), decision) is None


# -- (c) whether a stored grant still counts now ------------------------------------------------


def vote_refusal(request: ConfirmationRequest, voter: str,
                 records: Mapping[str, PersonRecord], approver_groups: tuple[str, ...] = (),
                 groups: Mapping[str, tuple[str, ...]] | None = None) -> str | None:
    """Why ``voter``'s approval of ``request`` no longer counts (None when it does). A
    voter without a record (the library's approvals) voted as eligible and still counts.
    With the agent's ``approver_groups``, ``groups`` (see `voter_groups`) must put the voter
    in one of them now."""
    why = refusal(Seat.of_request(request), person(voter, records, request.org_id), "approve")
    if why is None and approver_groups:
        why = group_refusal(voter, approver_groups, (groups or {}).get(voter))
    return why


async def voter_groups(tx: SessionTransaction, voter_ids: Iterable[str],
                       approver_groups: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """The provider groups of ``voter_ids`` as last read (one query; none is read when the
    agent names no ``approver_groups``)."""
    if not approver_groups:
        return {}
    return await oidc_sessions.read_groups(tx, voter_ids)


def voters(request: ConfirmationRequest) -> list[str]:
    return [str(a.get("user_id")) for a in request.approvals if a.get("user_id")]


async def counted(tx: SessionTransaction, request: ConfirmationRequest) -> ConfirmationRequest:
    """``request`` with only the approvals that count now in ``approvals`` (the others in
    ``discounted``, each with why), read in the transaction ``tx``."""
    if not request.approvals:
        return request
    return _counted(request, await people(tx, voters(request)))


def _counted(request: ConfirmationRequest, records: Mapping[str, PersonRecord]
             ) -> ConfirmationRequest:
    keep: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    seen: set[str] = set()
    for vote in request.approvals:
        user_id = str(vote.get("user_id"))
        if user_id in seen:
            continue
        seen.add(user_id)
        why = vote_refusal(request, user_id, records)
        if why is None:
            keep.append(dict(vote))
        else:
            dropped.append({**vote, "no_longer_counts": why})
    if not dropped:
        return request
    return replace(request, approvals=tuple(keep), discounted=tuple(dropped))


async def counted_now(db: Database, request: ConfirmationRequest) -> ConfirmationRequest:
    """`counted`, in a read of its own (for showing a request)."""
    if not request.approvals:
        return request
    return _counted(request, await user_records.people(db, voters(request)))


async def counted_all(db: Database, requests: list[ConfirmationRequest]
                      ) -> list[ConfirmationRequest]:
    """`counted` for a list, in one read."""
    if not any(r.approvals for r in requests):
        return requests
    records = await user_records.people(db, [v for r in requests for v in voters(r)])
    return [_counted(r, records) if r.approvals else r for r in requests]


async def grant_refusal(db: Database, creator: str, seat: Seat,
                        suspended: str | None = None) -> str | None:
    """Why a grant ``creator`` stored (a standing rule) no longer stands for a call of
    ``seat`` (None when it does): suspended, or its creator no longer eligible by their
    current record, under the same check as a live decision."""
    if suspended is not None:
        return f"the rule is suspended: {suspended}"
    records = await user_records.people(db, [creator])
    why = refusal(seat, person(creator, records, seat.org_id), "approve")
    return why if why is not None else await groups_refusal(db, creator, seat)


async def never_decides(db: Database, who: Approver) -> str | None:
    """Why ``who`` may make no decision at all, nor create, enable or revoke a standing rule
    (None when they may be considered further): a service identity, by the token's sign-in
    or its record now."""
    if who.service:
        return service_refusal(who.user_id)
    record = (await user_records.people(db, [who.user_id])).get(who.user_id)
    if record is not None and record.service:
        return service_refusal(who.user_id)
    return None


# -- (d) whom a call acts for -------------------------------------------------------------------


class NotActingFor(ValueError):
    """A call's ``acts_for`` names no person the caller may act for."""


async def acting_for(db: Database, caller_id: str, caller_org: str, caller_service: bool,
                     acts_for: str | None) -> str | None:
    """The person a call of the signed-in ``caller_id`` acts for: its initiator, whom
    ``approver_scope: initiator`` lets decide. A person acts for themself (``acts_for``
    absent or their own id). A service identity acts for the enabled person of its org that
    ``acts_for`` names, or for nobody (None: then no one is the initiator, and an initiator
    scoped request is decided only by those an escalation adds); never for itself.
    NotActingFor says why ``acts_for`` is refused."""
    if not caller_service:
        if acts_for is None or acts_for == caller_id:
            return caller_id
        raise NotActingFor(f"acts_for '{acts_for}': only a service identity (kind: service) "
                           f"acts for someone else; '{caller_id}' is a person and acts for "
                           "themself")
    if acts_for is None:
        return None
    record = (await user_records.people(db, [acts_for])).get(acts_for)
    if record is None or record.org_id != caller_org:
        raise NotActingFor(f"acts_for '{acts_for}' is not a user of org '{caller_org}'")
    if record.disabled:
        raise NotActingFor(f"acts_for '{acts_for}' is disabled")
    if record.service:
        raise NotActingFor(f"acts_for '{acts_for}' is a service identity: a call acts for "
                           "a person")
    return acts_for
