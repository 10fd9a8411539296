"""The expiry sweep of pending confirmation requests reads an index (migration 0008), on
SQLite and PostgreSQL, and the migrations build the indexes tables.py declares."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, text
from sqlalchemy.engine import Connection

from hookgate.storage.database import Database
from hookgate.storage.tables import Base, ConfirmationRequestRow
from tests.storage.plans import query_plan

OVERDUE = ("SELECT id FROM confirmation_requests "
           "WHERE status = 'pending' AND expires_at <= CURRENT_TIMESTAMP")


def _request(i: int, expires_at: datetime) -> dict[str, Any]:
    return {"id": f"req-{i}", "run_id": f"run-{i}", "tool_call_id": "c", "agent_id": "a",
            "mode": "auto", "approver_scope": "initiator", "status": "pending",
            "tool_name": "oa__pay", "args": {}, "args_sha256": "0" * 64,
            "created_at": expires_at - timedelta(hours=1), "expires_at": expires_at}


@pytest.mark.perf  # a query plan: a performance internal
@pytest.mark.both_databases
async def test_the_overdue_scan_reads_the_status_expiry_index(db: Database) -> None:
    now = datetime.now(UTC)
    waiting = [_request(i, now + timedelta(hours=1)) for i in range(3000)]
    overdue = [_request(3000 + i, now - timedelta(minutes=1)) for i in range(5)]
    table = ConfirmationRequestRow.__table__
    async with db.engine.begin() as conn:
        await conn.execute(insert(table), waiting + overdue)
        await conn.execute(text("ANALYZE"))
    async with db.engine.connect() as conn:
        detail = await query_plan(conn, OVERDUE)
        if db.backend.dialect == "sqlite":
            assert "ix_confirmation_status_expires (status=? AND expires_at<?)" in detail, detail
        else:
            assert "ix_confirmation_status_expires" in detail, detail
            assert "expires_at <=" in detail.split("Index Cond:")[1], detail
        found = (await conn.execute(text(OVERDUE))).scalars().all()
    assert sorted(found) == sorted(r["id"] for r in overdue)


def _index_differences(conn: Connection) -> list[Any]:
    diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    return [d for d in diffs if isinstance(d, tuple) and "index" in d[0]]


@pytest.mark.both_databases
async def test_the_migrated_indexes_are_the_declared_ones(db: Database) -> None:
    async with db.engine.connect() as conn:
        assert await conn.run_sync(_index_differences) == []
