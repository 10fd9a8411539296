"""The two kinds of transaction work is done in with a change: an ORM session's
(``Database.transaction()``), or the PostgreSQL backend's driver transaction (asyncpg, for
a request's change: docs/decisions/0032); and the few operations that work done in either
needs, each serving both (``storage.transaction`` gives them to the layers above)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, TypeAlias

from sqlalchemy import Table, bindparam, event, insert
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.storage.backends.pg_driver import DriverTransaction, counted_psycopg_statements
from hookgate.storage.backends.postgresql import PG_DIALECT, bound, column_binds

#: A transaction work is done in with a change (``then``): a session's, or the driver's.
Transaction: TypeAlias = AsyncSession | DriverTransaction


def after_commit(tx: Transaction, callback: Callable[[], None]) -> None:
    """Call ``callback`` once ``tx`` has committed (not if it rolls back); it runs inside the
    commit, so it should only schedule work."""
    if isinstance(tx, DriverTransaction):
        tx.after_commit(callback)
        return
    event.listen(tx.sync_session, "after_commit", lambda _: callback(), once=True)


async def statements(tx: Transaction) -> Any:
    """``tx``'s connection on PostgreSQL, inside the transaction, as the driver's statements
    (``fetchrow``, ``fetch``, ``execute``; ``$n`` parameters, prepared once per
    connection): asyncpg's for the driver's transaction, psycopg's for a session's."""
    if isinstance(tx, DriverTransaction):
        return tx.conn
    raw = await (await tx.connection()).get_raw_connection()
    return counted_psycopg_statements(raw.driver_connection)


async def insert_row(tx: Transaction, table: Table, values: dict[str, Any]) -> None:
    """One row of ``table`` in ``tx``: SQLAlchemy Core in a session; in the driver's
    transaction the same INSERT compiled once, its values bound as SQLAlchemy binds them
    on PostgreSQL (an aware time checked, JSON as text)."""
    if not isinstance(tx, DriverTransaction):
        await tx.execute(insert(table).values(**values))
        return
    sql, binds = _driver_insert(table, tuple(values))
    await tx.conn.execute(sql, *bound(binds, list(values.values())))


@cache
def _driver_insert(table: Table, columns: tuple[str, ...]
                   ) -> tuple[str, tuple[Callable[[Any], Any] | None, ...]]:
    done = insert(table).values({c: bindparam(c) for c in columns}).compile(
        dialect=PG_DIALECT)
    if tuple(done.positiontup or ()) != columns:
        raise RuntimeError(f"the insert into {table.name} binds {done.positiontup}, "
                           f"not {columns}")
    return str(done), column_binds(table, columns)
