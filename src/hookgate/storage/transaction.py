"""An open transaction as the layers above storage see it: a handle they pass on to work
done in it (a vote, a rule, a run's continuation), never a session they query themselves;
and the clock a statement writes, chosen here per dialect."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeAlias

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.storage.database import Database
from hookgate.storage.types import utcnow

#: A transaction ``Database.transaction()`` opened; only storage modules execute in it.
Transaction: TypeAlias = AsyncSession


def _on_sqlite(tx: Transaction) -> bool:
    return tx.bind is None or tx.bind.dialect.name == "sqlite"


def clock(db: Database, now: datetime | None = None) -> Any:
    """``now`` if given, else the time a statement should write: the database's clock on
    PostgreSQL (``now()``), this process's for a SQLite file."""
    if now is not None:
        return now
    return utcnow() if db.is_sqlite else func.now()


async def read_clock(tx: Transaction) -> datetime:
    """The transaction's time as a value (PostgreSQL's ``now()``; this process's on SQLite)."""
    if _on_sqlite(tx):
        return utcnow()
    return (await tx.execute(select(func.now()))).scalar_one()
