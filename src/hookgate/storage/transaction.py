"""An open transaction as the layers above storage see it: a handle they pass on to work
done in it (a vote, a rule, a run's continuation), never a session they query themselves;
and the clock a statement writes, as the database's backend keeps it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeAlias

from sqlalchemy import event, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.storage.database import Database
from hookgate.storage.types import utcnow

#: A transaction ``Database.transaction()`` opened; only storage modules execute in it.
Transaction: TypeAlias = AsyncSession


def clock(db: Database, now: datetime | None = None) -> Any:
    """``now`` if given, else the time a statement should write: the database's clock on
    PostgreSQL (``now()``), this process's for a SQLite file."""
    if now is not None:
        return now
    return db.backend.now_expression()


async def read_clock(tx: Transaction, db: Database) -> datetime:
    """The transaction's time as a value (PostgreSQL's ``now()``; this process's on SQLite)."""
    if db.backend.in_process:
        return utcnow()
    return (await tx.execute(select(func.now()))).scalar_one()


def after_commit(tx: Transaction, callback: Callable[[], None]) -> None:
    """Call ``callback`` once ``tx`` has committed (not if it rolls back); it runs inside the
    commit, so it should only schedule work."""
    event.listen(tx.sync_session, "after_commit", lambda _: callback(), once=True)
