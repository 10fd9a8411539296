"""The PostgreSQL hot paths of the built-in hooks: the audit log's one-statement append that
only lands on the head it expects, the org flag and rate-limit reads in autocommit."""

from __future__ import annotations

import pytest

from hookgate.storage.backends.pg_driver import PgDriver
from hookgate.storage.database import Database
from hookgate.storage.orgs import org_read_only, set_org_read_only, sync_orgs
from hookgate.storage.rate_limits import DatabaseRateCounter

ON_POSTGRES = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


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
