"""The ``approval_votes`` table and the quorum's statements on a request: one vote per
person (the unique (request, user) key decides, in whichever process), and the request's
row locked by a write before anything is counted, so simultaneous approvers count one by
one."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from hookgate.storage.confirmations import (
    ConfirmationRecord,
    VoteExists,
    insert_vote,
    record_of,
)
from hookgate.storage.database import Database
from hookgate.storage.tables import ApprovalVoteRow, ConfirmationRequestRow
from hookgate.storage.transaction import SessionTransaction, clock
from hookgate.storage.types import utcnow

_Row = ConfirmationRequestRow

__all__ = ["VoteExists", "add_vote", "approvers", "lock_pending", "record_approvals"]


async def add_vote(tx: SessionTransaction, request_id: str, user_id: str, decision: str, *,
                   via: str | None, channel_identity: str | None, reason: str | None
                   ) -> None:
    """Insert one person's vote in ``tx``; VoteExists if they voted before (`insert_vote`,
    which a decision's own change also writes its vote with)."""
    await insert_vote(tx, request_id, {
        "user_id": user_id, "decision": decision, "via": via,
        "channel_identity": channel_identity, "reason": reason, "created_at": utcnow()})


async def lock_pending(tx: SessionTransaction, db: Database, request_id: str
                       ) -> ConfirmationRecord | None:
    """The request, its row locked by a write, while pending and unexpired by the
    database's clock; None otherwise."""
    now = clock(db)
    row = (await tx.execute(
        update(_Row).where(_Row.id == request_id, _Row.status == "pending",
                           _Row.expires_at > now)
        .values(status="pending").returning(_Row))).scalar_one_or_none()
    return record_of(row) if row is not None else None


async def approvers(tx: SessionTransaction, request_id: str) -> list[str]:
    """Everyone who voted to approve the request so far."""
    return list((await tx.execute(
        select(ApprovalVoteRow.user_id).where(ApprovalVoteRow.request_id == request_id,
                                              ApprovalVoteRow.decision == "approve")
    )).scalars().all())


async def record_approvals(tx: SessionTransaction, db: Database, request_id: str,
                           approvals: list[dict[str, Any]], *,
                           decision: dict[str, Any] | None) -> ConfirmationRecord:
    """Store the request's approvals; with ``decision`` (its ``responded_by``, ``reason``,
    ... columns) it is approved now, at the database's clock."""
    values: dict[str, Any] = {"approvals": approvals}
    if decision is not None:
        values.update(status="approved", responded_at=clock(db), **decision)
    row = (await tx.execute(update(_Row).where(_Row.id == request_id).values(**values)
                            .returning(_Row))).scalar_one()
    return record_of(row)
