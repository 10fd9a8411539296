"""A lean lane to PostgreSQL for the records hooks keep on every tool call.

Through SQLAlchemy a one-row read is a checkout, a BEGIN, the statement and a ROLLBACK —
three round trips plus about a hundred microseconds of Python per statement. The lane
borrows a connection from the same pool (so limits and disposal stay one thing) and talks
to asyncpg directly: a single statement runs in autocommit (one round trip, no BEGIN), a
unit of work runs in one explicit transaction, and asyncpg prepares each statement text
once per connection and reuses it. Statements use PostgreSQL's ``$n`` parameters.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from hookgate.storage.database import Database
from hookgate.storage.statement_count import COUNT


class PgLane:
    """Single statements and short transactions on raw asyncpg connections of ``db``'s pool."""

    _lanes: weakref.WeakKeyDictionary[Database, PgLane] = weakref.WeakKeyDictionary()

    @classmethod
    def for_database(cls, db: Database) -> PgLane | None:
        """The lane of ``db``, or None when ``db`` is not PostgreSQL through asyncpg."""
        if db.engine.dialect.name != "postgresql" or db.engine.dialect.driver != "asyncpg":
            return None
        lane = cls._lanes.get(db)
        if lane is None:
            lane = cls._lanes[db] = cls(db)
        return lane

    def __init__(self, db: Database) -> None:
        self.db = db

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A raw asyncpg connection, back to the pool afterwards. SQLAlchemy began no
        transaction on it, so its reset on return is a no-op."""
        async with self.db.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            yield _Counted(raw.driver_connection) if COUNT.enabled else raw.driver_connection

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        """One statement in autocommit; its first row, or None."""
        async with self.connection() as conn:
            return await conn.fetchrow(sql, *args)

    async def execute(self, sql: str, *args: Any) -> str:
        """One statement in autocommit; its status ("INSERT 0 1", …)."""
        async with self.connection() as conn:
            return str(await conn.execute(sql, *args))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """A connection inside one transaction, committed when the block ends cleanly and
        rolled back when it raises."""
        async with self.connection() as conn, conn.transaction():
            yield conn


class _Counted:
    """An asyncpg connection whose statements bench/throughput.py counts."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        COUNT.statement()
        return await self._conn.fetchrow(sql, *args)

    async def execute(self, sql: str, *args: Any) -> Any:
        COUNT.statement()
        return await self._conn.execute(sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        COUNT.statement()
        return await self._conn.executemany(sql, rows)

    def transaction(self) -> Any:
        COUNT.transaction()
        return self._conn.transaction()
