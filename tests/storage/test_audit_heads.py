"""The audit chain's head a store remembers writing, on either database (decision records
0027 and the PostgreSQL fast path's): only a guess, checked where the append takes its lock,
so another store (here another `Database` on the same database, with its own connections
and memory, as another process) that appended since makes it read the head again, and
racing stores never fork the chain."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from hookgate.storage.audit import AuditLogStore, verify
from hookgate.storage.database import Database
from tests.hooks_builtin.procs import record
from tests.hooks_builtin.world import log_rows


@pytest.mark.both_databases
async def test_a_store_whose_remembered_head_went_stale_appends_after_the_new_head(
        db: Database, database_url: str) -> None:
    other_db = Database(database_url)  # another process, as far as the chain can tell
    try:
        mine, theirs = AuditLogStore.shared(db), AuditLogStore.shared(other_db)
        first = await mine.append(record(1))          # the head read; then remembered
        second = await mine.append(record(2))         # moved from the remembered head
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


@pytest.mark.both_databases
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
