"""The SQLite file's hot paths (decision record 0027): a one-statement write committed on
its own in autocommit, waiting for another writer's lock on the driver's thread; the audit
log's append on the head this backend remembers writing, checked under the write lock, so
another process (here: another `Database` on the same file, with its own connections and
memory) that appended since makes it fall back to reading the head, and never forks the
chain (those two on both databases: test_audit_heads.py)."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from hookgate.storage.audit import AuditLogStore
from hookgate.storage.backends.sqlite import ClaimNotFound
from hookgate.storage.backends.sqlite_driver import SqliteDriver
from hookgate.storage.database import Database
from hookgate.storage.ledger import DatabaseLedger
from hookgate.tools.ledger import PriorExecution
from tests.hooks_builtin.procs import record
from tests.hooks_builtin.world import log_rows


def _file(db: Database) -> str:
    driver = getattr(db.backend, "driver", None)
    assert isinstance(driver, SqliteDriver), "a SQLite file's backend"
    return driver.path


async def test_a_head_moved_outside_hookgate_is_read_again(db: Database) -> None:
    """The remembered head is only a guess: a head that moved by any other writer (here a
    plain connection) is read under the lock, and the row links after it."""
    store = AuditLogStore.shared(db)
    await store.append(record(1))
    with sqlite3.connect(_file(db)) as conn:  # the chain's head, moved by another writer
        conn.execute("UPDATE audit_chain_heads SET last_seq = 7, last_hash = ? "
                     "WHERE chain = 'acme'", ("e" * 64,))
    second = await store.append(record(2))
    assert second.seq == 8
    assert [(r["seq"], r["prev_hash"]) for r in await log_rows(db)][-1] == (8, "e" * 64)


async def test_a_one_statement_write_waits_for_another_writers_lock(db: Database) -> None:
    """A claim finds the write lock taken by another connection: it does nothing on the
    caller's thread, waits on the driver's, and lands once the lock is free."""
    ledger = DatabaseLedger(db)
    other = sqlite3.connect(_file(db), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        claim = asyncio.ensure_future(ledger.claim_finished(
            "r1", "started-1", "search", "d1", "kept", True))
        await asyncio.sleep(0.2)
        assert not claim.done()
        other.execute("COMMIT")
        assert await asyncio.wait_for(claim, 30) is None
    finally:
        other.close()
    assert await ledger.recorded("r1", "started-1") == PriorExecution("kept", True, "search",
                                                                      "d1")
    # Claimed again: the first record back, read after the claim changed nothing.
    assert await ledger.claim("r1", "started-1", "search", "d1") == PriorExecution(
        "kept", True, "search", "d1")


async def test_a_one_statement_write_that_fails_leaves_nothing_open(db: Database) -> None:
    """A statement that fails in autocommit is undone by SQLite alone: the caller's
    connection is left outside any transaction, and its next write lands."""
    ledger = DatabaseLedger(db)
    with pytest.raises(Exception, match="NOT NULL"):
        await ledger.claim_finished("r1", None, "search", "d1", "kept", True)  # type: ignore[arg-type]  # a NULL key
    assert await ledger.claim_finished("r1", "c1", "search", "d1", "kept", True) is None
    assert await ledger.recorded("r1", "c1") == PriorExecution("kept", True, "search", "d1")


async def test_a_claim_that_finds_its_entry_taken_and_then_gone_fails_closed(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The taken entry's record is read after the claim: were it not there (a ledger row is
    never deleted), the claim raises rather than read as this caller's."""
    ledger = DatabaseLedger(db)
    assert await ledger.claim("r1", "report-1", "report", "") is None

    async def gone(run_id: str, tool_call_id: str) -> None:
        return None

    monkeypatch.setattr(db.backend, "recorded", gone)
    with pytest.raises(ClaimNotFound):
        await ledger.claim("r1", "report-1", "report", "")
    with pytest.raises(ClaimNotFound):
        await ledger.claim_finished("r1", "report-1", "report", "", "kept", True)
