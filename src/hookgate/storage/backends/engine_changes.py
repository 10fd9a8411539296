"""A request's status change with its decider's vote through SQLAlchemy's engine (Core, an
ORM session's transaction): the backend whose fast path has no cheaper transaction takes it
from here (SQLite). The PostgreSQL backend makes the same change on its driver, in one
statement (postgresql.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, insert, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.storage.backends.base import VoteExists
from hookgate.storage.tables import ApprovalVoteRow, ConfirmationRequestRow

if TYPE_CHECKING:
    from hookgate.storage.database import Database
    from hookgate.storage.transaction import Transaction

_REQUESTS = cast(Table, ConfirmationRequestRow.__table__)
_VOTES = cast(Table, ApprovalVoteRow.__table__)


async def insert_vote(tx: AsyncSession, request_id: str, vote: dict[str, Any]) -> None:
    """Insert one person's vote (``approval_votes``' columns but the request's id) in
    ``tx``; VoteExists if they voted before. No savepoint: a second vote fails the whole
    transaction, so what it came with changes nothing. One Core INSERT: no ORM object for a
    row nothing reads back in this transaction (docs/decisions/0021)."""
    try:
        await tx.execute(insert(_VOTES).values(request_id=request_id, **vote))
    except IntegrityError:
        raise VoteExists(f"'{vote.get('user_id')}' already voted on request "
                         f"{request_id}") from None


class EngineChanges:
    """`Backend.change_transaction` and `change_request` in SQLAlchemy Core."""

    db: Database
    now_expression: Callable[[], Any]

    @asynccontextmanager
    async def change_transaction(self) -> AsyncIterator[Transaction]:
        async with self.db.transaction() as s:
            yield s

    async def change_request(self, tx: Transaction, request_id: str, status: str, *,
                             now: datetime | None, unexpired: bool,
                             decision: dict[str, Any], vote: dict[str, Any] | None
                             ) -> dict[str, Any] | None:
        assert isinstance(tx, AsyncSession), "a transaction of change_transaction()"
        when = self.now_expression() if now is None else now
        t = _REQUESTS
        cond = [t.c.id == request_id, t.c.status == "pending"]
        if unexpired:
            cond.append(t.c.expires_at > when)
        # Core, not the ORM's UPDATE ... RETURNING of an entity: the row is read once,
        # into the record, and no session keeps it (docs/decisions/0021).
        row = (await tx.execute(update(t).where(*cond).values(
            status=status, responded_at=when, **decision).returning(t))).one_or_none()
        if row is None:
            return None
        if vote is not None:  # only with the change (SQLite has no data-modifying WITH)
            await insert_vote(tx, request_id, vote)
        return dict(row._mapping)
