"""INSERT … ON CONFLICT DO UPDATE for the declarations synced at start (orgs, users,
agents, channels), on SQLite and PostgreSQL alike: any number of instances starting at once
write the same rows without a read-then-insert race."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.storage.backends.statements import insert_for


async def upsert(session: AsyncSession, table: Table, rows: Sequence[Mapping[str, Any]], *,
                 key: Iterable[str], update: Iterable[str]) -> None:
    """Insert ``rows``; a row whose ``key`` exists already takes the ``update`` columns of
    the new one (the others, e.g. operational state, stay as they are)."""
    if not rows:
        return
    stmt = insert_for(session.get_bind().dialect)(table).values(list(rows))
    changed = {c: stmt.excluded[c] for c in update}
    await session.execute(stmt.on_conflict_do_update(index_elements=list(key), set_=changed)
                          if changed else stmt.on_conflict_do_nothing(index_elements=list(key)))
