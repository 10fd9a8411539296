"""Four eyes and quorum: how many distinct people must approve a call, whether its requester
may be one of them, and the votes that count towards it. One reject rejects; an approval
below the quorum is recorded and the request stays pending until enough distinct people said
yes. Votes are counted under the request's row lock, so simultaneous approvers count right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.approvals import authority
from hookgate.approvals.authority import Requirement, requirement_for
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import ApprovalError
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.store import AfterTransition
from hookgate.matching import Condition, ToolMatcher
from hookgate.storage.database import Database
from hookgate.storage.tables import ApprovalVoteRow, ConfirmationRequestRow
from hookgate.storage.types import utcnow

#: The most approvals a rule may ask for (a quorum nobody can reach is a stuck request).
MAX_APPROVALS = 20


__all__ = ["MAX_APPROVALS", "AlreadyVoted", "QuorumRule", "QuorumVotes", "Requirement",
           "add_vote", "progress_text", "requirement_for", "with_vote"]


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


def progress_text(request: ConfirmationRequest) -> str | None:
    """``"1 of 2 approvals (alice)"`` for a request that needs more than one, else None.
    ``request`` as `authority.counted` gave it: only the approvals that count now."""
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
            # Only approvals that count now count: each voter is checked again, by their
            # current record, as a live decision would be (moved org, disabled, ...).
            voted = (await s.execute(
                select(ApprovalVoteRow.user_id)
                .where(ApprovalVoteRow.request_id == request_id,
                       ApprovalVoteRow.decision == "approve")
            )).scalars().all()
            seat = ConfirmationRequest.from_row(locked)
            records = await authority.people(s, voted)
            count = len({v for v in voted
                         if authority.vote_refusal(seat, v, records) is None})
            values: dict[str, Any] = {"approvals": approvals}
            if count >= locked.approvals_required:
                values.update(status="approved", responded_at=now, responded_by=who.user_id,
                              responder_channel_identity=who.channel_identity,
                              reason=reason, decided_via=who.via)
            row = (await s.execute(
                update(table).where(table.id == request_id).values(**values)
                .returning(table)
            )).scalar_one()
            after = await authority.counted(s, ConfirmationRequest.from_row(row))
            if not after.pending and then is not None:
                await then(s, after)
            return after


async def _clock(s: AsyncSession, db: Database) -> Any:
    if db.is_sqlite:
        return utcnow()
    return (await s.execute(select(func.now()))).scalar_one()
