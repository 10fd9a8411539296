"""Four eyes and quorum: how many distinct people must approve a call, whether its requester
may be one of them, and the votes that count towards it. One reject rejects; an approval
below the quorum is recorded and the request stays pending until enough distinct people said
yes. Votes are counted under the request's row lock, so simultaneous approvers count right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import ApprovalError
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.service import ApprovalAsk
from hookgate.approvals.store import AfterTransition
from hookgate.catalog.declarative.matcher import Condition, ToolMatcher, selects
from hookgate.storage.database import Database
from hookgate.storage.tables import ApprovalVoteRow, ConfirmationRequestRow, User
from hookgate.storage.types import utcnow

#: The most approvals a rule may ask for (a quorum nobody can reach is a stuck request).
MAX_APPROVALS = 20


class AlreadyVoted(ApprovalError):
    """This person already decided this request; a second vote of theirs counts nothing."""


@dataclass(frozen=True, slots=True)
class QuorumRule:
    """Calls matching ``matcher`` (and ``when``) need ``approvals_required`` distinct
    approvers; ``allow_self_approval`` False also keeps their requester from approving."""

    matcher: ToolMatcher
    when: Condition | None = None
    approvals_required: int = 2
    allow_self_approval: bool | None = None

    @classmethod
    def parse(cls, matcher: str, when: str | None, approvals_required: int,
              allow_self_approval: bool | None) -> QuorumRule:
        """From the configuration's strings; HookBuildError names a bad matcher or when."""
        return cls(ToolMatcher.parse(matcher), Condition(when) if when is not None else None,
                   approvals_required, allow_self_approval)

    def describe(self) -> str:
        what = f"'{self.matcher}'" + (f" when {self.when}" if self.when else "")
        return f"the agent's quorum rule for {what}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """What a request needs before it counts as approved, and in words why."""

    approvals_required: int = 1
    allow_self_approval: bool = True
    reasons: tuple[str, ...] = ()


def requirement_for(ask: ApprovalAsk) -> Requirement:
    """The agent's ``allow_self_approval`` and every quorum rule that picks this call (the
    strictest wins). A rule whose ``when`` cannot be evaluated picks the call: fail closed."""
    agent = ask.agent
    needed, self_ok, reasons = 1, agent.allow_self_approval, []
    if not agent.allow_self_approval:
        reasons.append(f"four eyes: the requester may not approve their own call (agent "
                       f"'{agent.id}' has allow_self_approval: false)")
    ctx = ask.condition_context()
    for rule in agent.approval_quorum:
        picked, error = selects(rule.matcher, rule.when, ctx)
        if not picked:
            continue
        failed = f" (its condition could not be evaluated: {error})" if error else ""
        if rule.approvals_required > needed:
            needed = rule.approvals_required
            reasons.append(f"{needed} distinct people must approve ({rule.describe()}"
                           f"{failed})")
        if rule.allow_self_approval is False and self_ok:
            self_ok = False
            reasons.append(f"four eyes: the requester may not approve their own call "
                           f"({rule.describe()}{failed})")
    return Requirement(needed, self_ok, tuple(reasons))


def self_approval_refusal(request: ConfirmationRequest, who: Approver, decision: str
                          ) -> str | None:
    """Why ``who`` may not approve ``request`` as its own requester (None when they may).
    Rejecting one's own call stays possible: it only stops it."""
    if (decision == "approve" and not request.allow_self_approval
            and request.requested_by is not None and who.user_id == request.requested_by):
        return (f"four eyes: '{who.user_id}' requested this call and may not approve it "
                "(allow_self_approval: false); another eligible person must")
    return None


def progress_text(request: ConfirmationRequest) -> str | None:
    """``"1 of 2 approvals (alice)"`` for a request that needs more than one, else None."""
    if request.approvals_required <= 1:
        return None
    names = ", ".join(str(a.get("user_id")) for a in request.approvals)
    return (f"{len(request.approvals)} of {request.approvals_required} approvals"
            + (f" ({names})" if names else ""))


def vote_entry(who: Approver, at: Any) -> dict[str, Any]:
    return {"user_id": who.user_id, "via": who.via,
            "at": at.isoformat() if hasattr(at, "isoformat") else None}


async def add_vote(s: AsyncSession, request_id: str, who: Approver, decision: str,
                   reason: str | None) -> None:
    """Insert ``who``'s vote in the transaction ``s``; AlreadyVoted if they voted before
    (the unique (request, user) key decides, in whichever process)."""
    # No savepoint: a second vote fails the whole transaction, so the decision it came
    # with changes nothing either.
    s.add(ApprovalVoteRow(request_id=request_id, user_id=who.user_id, decision=decision,
                          via=who.via, channel_identity=who.channel_identity, reason=reason,
                          created_at=utcnow()))
    try:
        await s.flush()
    except IntegrityError:
        raise AlreadyVoted(f"'{who.user_id}' already decided request {request_id}; "
                           "one person counts once") from None


def with_vote(who: Approver, decision: str, reason: str | None,
              then: AfterTransition | None) -> AfterTransition:
    """``then`` preceded by recording the final decision's vote in the same transaction."""

    async def both(s: AsyncSession, after: ConfirmationRequest) -> None:
        await add_vote(s, after.id, who, decision, reason)
        if then is not None:
            await then(s, after)

    return both


class QuorumVotes:
    """Approvals towards a quorum, counted in one transaction per vote."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def approve(self, request_id: str, who: Approver, reason: str | None,
                      then: AfterTransition | None) -> ConfirmationRequest | None:
        """Record ``who``'s approval; the request as it now is (``approved`` once the quorum
        is reached, else still pending with one more approver), or None when it was no
        longer pending or expired by the database's clock. AlreadyVoted: nothing changed."""
        now: Any = utcnow() if self.db.is_sqlite else func.now()
        table = ConfirmationRequestRow
        async with self.db.transaction() as s:
            # A write first: it takes the row lock on PostgreSQL (and SQLite's write lock)
            # before anything is counted, so two approvers at once are counted one by one.
            locked = (await s.execute(
                update(table)
                .where(table.id == request_id, table.status == "pending",
                       table.expires_at > now)
                .values(status="pending")
                .returning(table)
            )).scalar_one_or_none()
            if locked is None:
                return None
            await add_vote(s, request_id, who, "approve", reason)
            stamp = await _clock(s, self.db)
            approvals = [*(locked.approvals or ()), vote_entry(who, stamp)]
            # Only approvers still enabled count: someone disabled after voting no longer
            # stands behind the call (an unknown user — the library without a users
            # table's rows — still counts).
            count = (await s.execute(
                select(func.count(func.distinct(ApprovalVoteRow.user_id)))
                .select_from(ApprovalVoteRow)
                .outerjoin(User, User.id == ApprovalVoteRow.user_id)
                .where(ApprovalVoteRow.request_id == request_id,
                       ApprovalVoteRow.decision == "approve",
                       or_(User.disabled.is_(None), User.disabled.is_(False)))
            )).scalar_one()
            values: dict[str, Any] = {"approvals": approvals}
            if count >= locked.approvals_required:
                values.update(status="approved", responded_at=now, responded_by=who.user_id,
                              responder_channel_identity=who.channel_identity,
                              reason=reason, decided_via=who.via)
            row = (await s.execute(
                update(table).where(table.id == request_id).values(**values)
                .returning(table)
            )).scalar_one()
            after = ConfirmationRequest.from_row(row)
            if not after.pending and then is not None:
                await then(s, after)
            return after


async def _clock(s: AsyncSession, db: Database) -> Any:
    if db.is_sqlite:
        return utcnow()
    return (await s.execute(select(func.now()))).scalar_one()
