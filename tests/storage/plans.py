"""The query plan a database chose, as text, for tests that check an index is read."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection


async def query_plan(conn: AsyncConnection, sql: str) -> str:
    """SQLite's EXPLAIN QUERY PLAN details, or PostgreSQL's EXPLAIN lines, joined."""
    if conn.dialect.name == "sqlite":
        rows = (await conn.execute(text("EXPLAIN QUERY PLAN " + sql))).all()
        return " ".join(str(row[-1]) for row in rows)
    rows = (await conn.execute(text("EXPLAIN " + sql))).all()
    return " ".join(str(row[0]) for row in rows)
