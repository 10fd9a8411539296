"""A run's event log is read through its (run_id, seq) key, on SQLite and PostgreSQL:
migration 0014 dropped the index on run_id alone, which that key's index made redundant,
and 0031 made (run_id, seq) the table's primary key, without the serial id nothing read."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, text
from sqlalchemy.exc import IntegrityError

from hookgate.storage.database import Database
from hookgate.storage.tables import RunEventRow
from tests.storage.migration_steps import columns, downgrade
from tests.storage.plans import query_plan

# The log read (storage/backends/statements.py, "events_after"), with literals.
AFTER = ("SELECT type, data, seq FROM run_events WHERE run_id = 'run-7' AND seq > 2 "
         "ORDER BY seq")


@pytest.mark.perf  # a query plan: a performance internal
@pytest.mark.both_databases
async def test_a_runs_events_are_read_through_the_unique_index(db: Database) -> None:
    now = datetime.now(UTC)
    rows = [{"run_id": f"run-{r}", "seq": s, "type": "tool_call", "data": {"s": s},
             "created_at": now} for r in range(400) for s in range(1, 9)]
    async with db.engine.begin() as conn:
        await conn.execute(insert(RunEventRow.__table__), rows)
        await conn.execute(text("ANALYZE"))
    indexes = await _indexes(db)
    assert "ix_run_events_run_id" not in indexes, indexes
    assert len(indexes) == 1, indexes  # the key's, and no other
    async with db.engine.connect() as conn:
        detail = await query_plan(conn, AFTER)
        used = "(run_id=? AND seq>?)" if db.backend.dialect == "sqlite" else "run_events_pkey"
        assert used in detail, detail
        seqs = (await conn.execute(text(AFTER))).scalars().all()
    assert seqs == ["tool_call"] * 6


async def _indexes(db: Database) -> list[str]:
    async with db.engine.connect() as conn:
        return list((await conn.execute(text(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'run_events'"
            if db.backend.dialect == "sqlite" else
            "SELECT indexname FROM pg_indexes WHERE tablename = 'run_events'"))).scalars())


@pytest.mark.both_databases
@pytest.mark.empty_database
async def test_an_existing_log_keeps_its_events_across_0014_and_back(database_url: str
                                                                      ) -> None:
    db = Database(database_url)
    try:
        await db.upgrade("0013")
        assert "ix_run_events_run_id" in await _indexes(db)
        async with db.engine.begin() as conn:
            await conn.execute(insert(RunEventRow.__table__), [
                {"run_id": "run-1", "seq": s, "type": "t", "data": {}, "created_at":
                 datetime.now(UTC)} for s in (1, 2, 3)])
        await db.upgrade()
        assert "ix_run_events_run_id" not in await _indexes(db)
        async with db.engine.begin() as conn:
            await conn.run_sync(downgrade, "0013")
        assert "ix_run_events_run_id" in await _indexes(db)
        async with db.engine.connect() as conn:
            seqs = (await conn.execute(text(
                "SELECT seq FROM run_events WHERE run_id = 'run-1' ORDER BY seq"))).scalars()
            assert list(seqs) == [1, 2, 3]
    finally:
        await db.dispose()


async def _log(db: Database, run_id: str) -> list[tuple[int, str]]:
    async with db.engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(text(
            "SELECT seq, type FROM run_events WHERE run_id = :r ORDER BY seq"),
            {"r": run_id})).all()]


@pytest.mark.both_databases
@pytest.mark.empty_database
async def test_an_existing_log_keeps_its_events_and_its_one_event_per_seq_across_0031_and_back(
        database_url: str) -> None:
    db = Database(database_url)
    stamp = datetime.now(UTC)

    async def add(run_id: str, *seqs: int) -> None:
        async with db.engine.begin() as conn:
            await conn.execute(insert(RunEventRow.__table__), [
                {"run_id": run_id, "seq": s, "type": f"t{s}", "data": {}, "created_at": stamp}
                for s in seqs])

    try:
        await db.upgrade("0030")
        assert "id" in await columns(db, "run_events")
        await add("run-1", 1, 2, 3)
        await db.upgrade()
        assert "id" not in await columns(db, "run_events")
        assert await _log(db, "run-1") == [(1, "t1"), (2, "t2"), (3, "t3")]
        await add("run-1", 4)
        with pytest.raises(IntegrityError):  # one event per (run, seq), as before
            await add("run-1", 2)
        async with db.engine.begin() as conn:
            await conn.run_sync(downgrade, "0030")
        assert "id" in await columns(db, "run_events")
        assert await _log(db, "run-1") == [(1, "t1"), (2, "t2"), (3, "t3"), (4, "t4")]
        await add("run-2", 1)  # the serial id numbers new events again
        with pytest.raises(IntegrityError):
            await add("run-1", 4)
        async with db.engine.connect() as conn:
            ids = (await conn.execute(text(
                "SELECT id FROM run_events ORDER BY run_id, seq"))).scalars().all()
        assert len(set(ids)) == 5 and None not in ids, ids
    finally:
        await db.dispose()
