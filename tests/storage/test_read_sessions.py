"""Reads and writes keep their own transaction modes: on PostgreSQL a read session runs in
autocommit (one round trip a read, and psycopg keeps its prepared statements, which a
ROLLBACK makes it deallocate), while a write transaction stays one atomic unit — a failure
half-way stores nothing, and a connection handed back by a read serves a write
transactionally again."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from hookgate.storage.database import Database
from hookgate.storage.tables import Org

pytestmark = pytest.mark.both_databases


class Boom(Exception):
    pass


async def driver_autocommit(db: Database, *, reading: bool) -> bool:
    context = db.session() if reading else db.transaction()
    async with context as s:
        raw = await (await s.connection()).get_raw_connection()
        return bool(raw.driver_connection.autocommit)  # psycopg's own flag


@pytest.mark.perf  # the driver's transaction mode (round trips a read): an internal
async def test_reads_run_in_autocommit_on_postgresql(db: Database) -> None:
    if db.backend.dialect != "sqlite":
        assert await driver_autocommit(db, reading=True)
        assert not await driver_autocommit(db, reading=False)
    await reads_and_failed_writes_alternate(db)


async def test_a_write_that_fails_half_way_stores_nothing_between_reads(db: Database) -> None:
    await reads_and_failed_writes_alternate(db)


async def reads_and_failed_writes_alternate(db: Database) -> None:
    for _ in range(3):  # connections go back and forth between reads and writes
        async with db.session() as s:
            before = (await s.execute(select(func.count()).select_from(Org))).scalar_one()
        with pytest.raises(Boom):
            async with db.transaction() as s:
                s.add(Org(id="half_way", name="Half way"))
                await s.flush()  # the row is written inside the transaction …
                raise Boom()  # … which then fails: nothing of it is kept
        async with db.session() as s:
            after = (await s.execute(select(func.count()).select_from(Org))).scalar_one()
            assert await s.get(Org, "half_way") is None
        assert after == before
