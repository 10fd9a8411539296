"""A new database is made from the rendered head schema, not by Alembic: it must be the very
schema every migration makes (SQLite's DDL text, PostgreSQL's catalog), on both backends;
anything not empty, or a rendering of another revision, still goes through Alembic, and
several processes making one new database at once all come up on it."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from hookgate.storage.database import MIGRATIONS, Database, DatabaseError
from hookgate.storage.head_schema import HEAD_SCHEMAS, create_at_head, head_schema, parse
from hookgate.storage.schema_version import bundled_heads

pytestmark = [pytest.mark.both_databases, pytest.mark.empty_database]

VERSIONS = MIGRATIONS / "versions"
(HEAD,) = bundled_heads(VERSIONS) or ("?",)

#: What makes a PostgreSQL schema, read from the catalog (column order, not position: a
#: dropped column leaves a gap in the numbering that a new table does not have).
PG_CATALOG = {
    "columns": "SELECT table_name, column_name, data_type, udt_name, is_nullable, "
               "column_default, character_maximum_length, numeric_precision, numeric_scale, "
               "datetime_precision, is_identity, is_generated, generation_expression FROM "
               "information_schema.columns WHERE table_schema = current_schema() "
               "ORDER BY table_name, ordinal_position",
    "relations": "SELECT relname, relkind, relpersistence, reloptions FROM pg_class WHERE "
                 "relnamespace = current_schema()::regnamespace ORDER BY relname",
    "constraints": "SELECT conrelid::regclass::text, conname, contype, condeferrable, "
                   "pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = "
                   "current_schema()::regnamespace ORDER BY 1, 2",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = "
               "current_schema() ORDER BY 1, 2",
    "sequences": "SELECT sequence_name, data_type, start_value, minimum_value, "
                 "maximum_value, increment, cycle_option FROM information_schema.sequences "
                 "WHERE sequence_schema = current_schema() ORDER BY 1",
    "sequence owners": "SELECT s.relname, t.relname, a.attname FROM pg_depend d JOIN pg_class "
                       "s ON s.oid = d.objid AND s.relkind = 'S' JOIN pg_class t ON t.oid = "
                       "d.refobjid JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = "
                       "d.refobjsubid WHERE s.relnamespace = current_schema()::regnamespace "
                       "ORDER BY 1",
    "triggers": "SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM "
                "pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2",
    "types": "SELECT typname, typtype FROM pg_type WHERE typnamespace = "
             "current_schema()::regnamespace AND typrelid = 0 ORDER BY 1",
    "functions": "SELECT proname, pg_get_functiondef(oid) FROM pg_proc WHERE pronamespace = "
                 "current_schema()::regnamespace ORDER BY 1",
    "comments": "SELECT objoid::regclass::text, objsubid, description FROM pg_description d "
                "JOIN pg_class c ON c.oid = d.objoid WHERE c.relnamespace = "
                "current_schema()::regnamespace ORDER BY 1, 2",
}
#: SQLite's DDL text of every index, view and trigger (a table's, see ``sqlite_tables``).
SQLITE_CATALOG = {"schema": "SELECT type, name, tbl_name, sql FROM sqlite_master "
                            "WHERE type != 'table' AND name NOT LIKE 'sqlite_autoindex%' "
                            "ORDER BY type, name"}
ROWS = {"alembic_version": "SELECT version_num FROM alembic_version"}


def sqlite_tables(conn: Connection) -> list[tuple[Any, ...]]:
    """Each table: its DDL's definitions, its columns in order, its foreign keys and the
    indexes its constraints make. Alembic's batch migrations write a rebuilt table's
    constraints in an order that varies from run to run (a set's), so the DDL's definitions
    are compared as a set, and the indexes SQLite makes for them by what they index, not by
    their numbered names."""
    tables = []
    for name, sql in conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").all():
        body = sql[sql.index("(") + 1:sql.rindex(")")]
        definitions = sorted(d.strip() for d in re.split(r",\s*\n", body))
        columns = conn.exec_driver_sql(f'PRAGMA table_xinfo("{name}")').all()
        keys = sorted(conn.exec_driver_sql(f'PRAGMA foreign_key_list("{name}")').all(),
                      key=str)
        indexes = sorted(
            (unique, origin, partial,
             tuple(c[2] for c in conn.exec_driver_sql(f'PRAGMA index_info("{index}")')))
            for _, index, unique, origin, partial in conn.exec_driver_sql(
                f'PRAGMA index_list("{name}")').all())
        tables.append((name, sql.split("(")[0], definitions, [tuple(c) for c in columns],
                       [tuple(k)[1:] for k in keys], indexes))
    return tables


async def schema_of(url: str) -> dict[str, Any]:
    """Every fact that makes the database's schema, and the rows a new one holds."""
    db = Database(url)
    try:
        sqlite = db.engine.dialect.name == "sqlite"
        async with db.engine.connect() as conn:
            facts = {name: [tuple(r) for r in (await conn.execute(text(sql))).all()]
                     for name, sql in {**(SQLITE_CATALOG if sqlite else PG_CATALOG),
                                       **ROWS}.items()}
            if sqlite:
                facts["tables"] = await conn.run_sync(sqlite_tables)
            return facts
    finally:
        await db.dispose()


@pytest.fixture
def second_url(database_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """Another empty database of the same backend."""
    if database_url.startswith("sqlite"):
        yield f"sqlite+aiosqlite:///{tmp_path / 'second.db'}"
        return
    from tests.conftest import _drop_pg_database, _fresh_pg_database

    server = request.getfixturevalue("postgres_server_url")
    url = _fresh_pg_database(server)
    yield url
    _drop_pg_database(server, url)


async def migrate(url: str, revision: str = "head") -> None:
    db = Database(url)
    try:
        await db.upgrade(revision)
    finally:
        await db.dispose()


def dialect_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgresql"


async def test_the_rendered_schema_is_what_every_migration_makes(
        database_url: str, second_url: str) -> None:
    await migrate(second_url, HEAD)  # the head by its id: every migration, through Alembic
    await migrate(database_url)  # an empty database at "head": the rendered schema
    by_alembic, rendered = await schema_of(second_url), await schema_of(database_url)
    differing = {name: {"migrations only": [r for r in rows if r not in rendered[name]],
                        "rendered only": [r for r in rendered[name] if r not in rows]}
                 for name, rows in by_alembic.items() if rows != rendered[name]}
    assert not differing, (
        "the rendered head schema differs from what the migrations make (run "
        f"scripts/render_head_schema.py): {differing}")
    assert by_alembic["alembic_version"] == [(HEAD,)]


async def test_a_new_database_is_made_without_alembic(database_url: str) -> None:
    schema = head_schema(dialect_of(database_url), VERSIONS)
    assert schema is not None and schema.revision == HEAD
    db = Database(database_url)
    try:
        assert await create_at_head(db.engine, db.backend, VERSIONS)
        # Not twice: the database now holds the schema.
        assert not await create_at_head(db.engine, db.backend, VERSIONS)
    finally:
        await db.dispose()


async def test_a_database_holding_anything_is_left_to_alembic(database_url: str) -> None:
    db = Database(database_url)
    try:
        async with db.engine.begin() as conn:
            await conn.execute(text("CREATE TABLE someone_elses (id INTEGER PRIMARY KEY)"))
        assert not await create_at_head(db.engine, db.backend, VERSIONS)
        async with db.engine.connect() as conn:
            assert (await conn.execute(text(
                "SELECT count(*) FROM someone_elses"))).scalar_one() == 0
    finally:
        await db.dispose()


async def test_a_database_at_an_unknown_revision_still_fails(database_url: str) -> None:
    await migrate(database_url)
    db = Database(database_url)
    try:
        async with db.engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = 'zzzz_newer'"))
        with pytest.raises(DatabaseError, match="zzzz_newer"):
            await db.upgrade()
    finally:
        await db.dispose()


async def test_an_older_database_is_migrated_by_alembic(database_url: str) -> None:
    await migrate(database_url, "0028")
    await migrate(database_url)
    assert (await schema_of(database_url))["alembic_version"] == [(HEAD,)]


async def test_several_processes_making_one_new_database_all_come_up(
        database_url: str) -> None:
    dbs = [Database(database_url) for _ in range(5)]
    try:
        await asyncio.gather(*(db.upgrade() for db in dbs))
    finally:
        for db in dbs:
            await db.dispose()
    assert (await schema_of(database_url))["alembic_version"] == [(HEAD,)]


def test_a_rendering_of_another_revision_is_not_used(tmp_path: Path) -> None:
    versions = tmp_path / "versions"
    shutil.copytree(VERSIONS, versions)
    (versions / "9999_newer.py").write_text(f"revision = '9999'\ndown_revision = '{HEAD}'\n")
    head_schema.cache_clear()
    assert head_schema("sqlite", versions) is None
    assert head_schema("sqlite", VERSIONS) is not None
    for dialect in ("sqlite", "postgresql"):
        first = (HEAD_SCHEMAS / f"{dialect}.sql").read_text(encoding="utf-8").splitlines()[0]
        assert parse(first + "\n").revision == HEAD
