"""An open transaction as the layers above storage see it: a handle they pass on to work
done in it (a vote, a rule, a run's continuation), never a session they query themselves;
and the clock a statement writes, as the database's backend keeps it.

A transaction is an ORM session (``Database.transaction()``), or, for a decision on
PostgreSQL, the backend's driver transaction (asyncpg: docs/decisions/0032); the work that
commits with a change goes through the few functions here, which serve both."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeAlias

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.storage.backends.transactions import Transaction as Transaction
from hookgate.storage.backends.transactions import after_commit as after_commit
from hookgate.storage.backends.transactions import insert_row as insert_row
from hookgate.storage.backends.transactions import statements as statements
from hookgate.storage.database import Database
from hookgate.storage.types import utcnow

#: A transaction ``Database.transaction()`` opened: storage modules query in it.
SessionTransaction: TypeAlias = AsyncSession


def clock(db: Database, now: datetime | None = None) -> Any:
    """``now`` if given, else the time a statement should write: the database's clock on
    PostgreSQL (``now()``), this process's for a SQLite file."""
    if now is not None:
        return now
    return db.backend.now_expression()


async def read_clock(tx: SessionTransaction, db: Database) -> datetime:
    """The transaction's time as a value (PostgreSQL's ``now()``; this process's on SQLite)."""
    if db.backend.in_process:
        return utcnow()
    return (await tx.execute(select(func.now()))).scalar_one()
