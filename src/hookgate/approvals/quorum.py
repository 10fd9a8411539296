"""Four eyes and quorum: how many distinct people must approve a call, whether its requester
may be one of them, and the votes that count towards it. One reject rejects; an approval
below the quorum is recorded and the request stays pending until enough distinct people said
yes. Votes are counted under the request's row lock, so simultaneous approvers count right.
"""

from __future__ import annotations

from typing import Any

from hookgate.approvals import authority
from hookgate.approvals.authority import Requirement, requirement_for
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import ApprovalError
from hookgate.approvals.quorum_rule import MAX_APPROVALS, QuorumRule
from hookgate.approvals.records import ConfirmationRequest
from hookgate.approvals.store import AfterTransition
from hookgate.storage import approval_votes
from hookgate.storage.database import Database
from hookgate.storage.transaction import SessionTransaction, read_clock
from hookgate.storage.types import utcnow

__all__ = ["MAX_APPROVALS", "AlreadyVoted", "QuorumRule", "QuorumVotes", "Requirement",
           "add_vote", "already_voted", "final_vote", "progress_text", "requirement_for"]


class AlreadyVoted(ApprovalError):
    """This person already decided this request; a second vote of theirs counts nothing."""


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


async def add_vote(tx: SessionTransaction, request_id: str, who: Approver, decision: str,
                   reason: str | None) -> None:
    """Record ``who``'s vote in the transaction ``tx``; AlreadyVoted if they voted before
    (the unique (request, user) key decides, in whichever process; the whole transaction
    fails then, so the decision it came with changes nothing either)."""
    try:
        await approval_votes.add_vote(tx, request_id, who.user_id, decision, via=who.via,
                                      channel_identity=who.channel_identity, reason=reason)
    except approval_votes.VoteExists:
        raise already_voted(who, request_id) from None


def final_vote(who: Approver, decision: str, reason: str | None) -> dict[str, Any]:
    """The final decision's vote, written by the decision's own compare-and-set
    (`ConfirmationStore.transition`'s ``vote``: one statement on PostgreSQL)."""
    return {"user_id": who.user_id, "decision": decision, "via": who.via,
            "channel_identity": who.channel_identity, "reason": reason,
            "created_at": utcnow()}


def already_voted(who: Approver, request_id: str) -> AlreadyVoted:
    return AlreadyVoted(f"'{who.user_id}' already decided request {request_id}; "
                        "one person counts once")


class QuorumVotes:
    """Approvals towards a quorum, counted in one transaction per vote."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def approve(self, request_id: str, who: Approver, reason: str | None,
                      then: AfterTransition | None, *, approver_groups: tuple[str, ...]
                      ) -> ConfirmationRequest | None:
        """Record ``who``'s approval; the request as it now is (``approved`` once the quorum
        is reached, else still pending with one more approver), or None when it was no
        longer pending or expired by the database's clock. AlreadyVoted: nothing changed."""
        async with self.db.transaction() as tx:
            # A write first: it takes the row lock on PostgreSQL (and SQLite's write lock)
            # before anything is counted, so two approvers at once are counted one by one.
            locked = await approval_votes.lock_pending(tx, self.db, request_id)
            if locked is None:
                return None
            await add_vote(tx, request_id, who, "approve", reason)
            stamp = await read_clock(tx, self.db)
            approvals = [*locked.approvals, vote_entry(who, stamp)]
            # Only approvals that count now count: each voter is checked again, by their
            # current record, as a live decision would be (moved org, disabled, ...).
            voted = await approval_votes.approvers(tx, request_id)
            seat = ConfirmationRequest.from_record(locked)
            records = await authority.people(tx, voted)
            # With the agent's approver_groups, each voter's provider groups as now read.
            groups = await authority.voter_groups(tx, voted, approver_groups)
            count = len({v for v in voted if authority.vote_refusal(
                seat, v, records, approver_groups, groups) is None})
            decision = None
            if count >= locked.approvals_required:
                decision = {"responded_by": who.user_id,
                            "responder_channel_identity": who.channel_identity,
                            "reason": reason, "decided_via": who.via}
            record = await approval_votes.record_approvals(tx, self.db, request_id,
                                                           approvals, decision=decision)
            after = await authority.counted(tx, ConfirmationRequest.from_record(record))
            if not after.pending and then is not None:
                await then(tx, after)
            return after
