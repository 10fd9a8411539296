"""The PostgreSQL hot paths of the built-in hooks: the audit log's one-statement append that
only lands on the head it expects, the org flag and rate-limit reads in autocommit."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from hookgate.storage.audit import AuditLogStore, verify
from hookgate.storage.backends.pg_driver import PgDriver
from hookgate.storage.database import Database
from hookgate.storage.orgs import org_read_only, set_org_read_only, sync_orgs
from hookgate.storage.rate_limits import DatabaseRateCounter
from tests.hooks_builtin.procs import record
from tests.hooks_builtin.world import log_rows

ON_POSTGRES = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


@ON_POSTGRES
async def test_a_store_whose_remembered_head_went_stale_appends_after_the_new_head(
        db: Database, database_url: str) -> None:
    other_db = Database(database_url)  # another process, as far as the chain can tell
    try:
        mine, theirs = AuditLogStore.shared(db), AuditLogStore.shared(other_db)
        first = await mine.append(record(1))          # locking path; head remembered
        second = await mine.append(record(2))         # one statement on the remembered head
        third = await theirs.append(record(3))        # the other writer moves the head
        fourth = await mine.append(record(4))         # remembered head is stale: falls back
        fifth = await mine.append(record(5))
        assert [p.seq for p in (first, second, third, fourth, fifth)] == [1, 2, 3, 4, 5]
        rows = await log_rows(db)
        assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]
        assert [r["run_id"] for r in rows] == ["run-1", "run-2", "run-3", "run-4", "run-5"]
        for before, after in itertools.pairwise(rows):
            assert after["prev_hash"] == before["row_hash"]
        report = await verify(db)
        assert report.ok, report.problems
        assert report.heads["acme"] == (5, fifth.row_hash)
    finally:
        await other_db.dispose()


@ON_POSTGRES
async def test_racing_stores_on_one_chain_never_fork_it(db: Database,
                                                       database_url: str) -> None:
    others = [Database(database_url) for _ in range(3)]
    try:
        stores = [AuditLogStore.shared(d) for d in (db, *others)]

        async def writer(store: AuditLogStore, base: int) -> None:
            for i in range(25):
                await store.append(record(base + i))

        await asyncio.gather(*(writer(s, 100 * n) for n, s in enumerate(stores)))
        rows = await log_rows(db)
        assert [r["seq"] for r in rows] == list(range(1, 101))
        assert (await verify(db)).ok
    finally:
        for d in others:
            await d.dispose()


@ON_POSTGRES
async def test_org_flag_and_rate_limit_use_the_driver_without_a_transaction(
        db: Database) -> None:
    assert isinstance(db.backend.driver, PgDriver)
    await sync_orgs(db, [("acme", "ACME", False)])
    assert await org_read_only(db, "acme") is False
    await set_org_read_only(db, "acme", True)
    assert await org_read_only(db, "acme") is True
    assert await org_read_only(db, "nope") is None
    counter = DatabaseRateCounter(db)
    now = 1_000_000.0
    taken = [await counter.take("oa:alice", 2, 60, now) for _ in range(3)]
    assert [s.allowed for s in taken] == [True, True, False]
    assert taken[2].retry_after > 0
    assert (await counter.take("oa:alice", 2, 60, now + 60)).allowed  # a new window
    # No transaction was left open on the pooled connections.
    driver = db.backend.driver
    assert isinstance(driver, PgDriver)
    async with driver.connection() as conn:
        assert not conn.is_in_transaction()


def test_sqlite_has_no_pg_driver() -> None:
    assert not isinstance(Database("sqlite+aiosqlite:///:memory:").backend.driver, PgDriver)
