"""The one module that relies on procrastinate's private schema and query texts says so
loudly when the installed procrastinate, or its schema in the database, is not one it was
written for."""

from __future__ import annotations

import psycopg
import pytest
from procrastinate.schema import SchemaManager

from hookgate.runs.executors.procrastinate_private import (
    WORKER_FOREIGN_KEY,
    UnsupportedProcrastinate,
    check_schema,
    check_version,
)
from hookgate.storage.database import Database
from tests.conftest import _fresh_pg_database


def test_the_installed_procrastinate_is_one_the_queue_was_written_for() -> None:
    check_version()


@pytest.mark.parametrize("version", ["4.0.0", "3.9.2", "5.1"])
def test_another_procrastinate_version_is_refused_by_name(version: str) -> None:
    with pytest.raises(UnsupportedProcrastinate, match=rf"procrastinate {version} is "
                       r"installed.*procrastinate_private\.py"):
        check_version(version)


@pytest.fixture
def pg_url(postgres_server_url: str) -> str:
    return _fresh_pg_database(postgres_server_url)


async def test_a_schema_missing_what_the_queue_relies_on_is_refused_saying_what(
        pg_url: str) -> None:
    db = Database(pg_url)
    try:
        async with await psycopg.AsyncConnection.connect(db.libpq_url, autocommit=True) as c:
            await c.execute(SchemaManager.get_schema())
        await check_schema(db)  # procrastinate's own schema: everything is there
        async with await psycopg.AsyncConnection.connect(db.libpq_url, autocommit=True) as c:
            await c.execute(f"ALTER TABLE procrastinate_jobs DROP CONSTRAINT "
                            f"{WORKER_FOREIGN_KEY}")
            await c.execute("ALTER TABLE procrastinate_jobs RENAME COLUMN queueing_lock "
                            "TO queueing_key")
        with pytest.raises(UnsupportedProcrastinate) as refused:
            await check_schema(db)
        assert WORKER_FOREIGN_KEY in str(refused.value)
        assert "procrastinate_jobs.queueing_lock" in str(refused.value)
    finally:
        await db.dispose()
