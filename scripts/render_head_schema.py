"""Render ``src/hookgate/storage/migrations/head/{sqlite,postgresql}.sql``: the DDL the
bundled Alembic migrations leave in a new database, which a new database is then made from
(hookgate/storage/head_schema.py). Run it after adding a migration; the test
tests/storage/test_head_schema.py fails until it is run.

    HOOKGATE_TEST_POSTGRES_URL=postgresql+asyncpg://... python scripts/render_head_schema.py

PostgreSQL's DDL comes from ``pg_dump --schema-only`` of a database migrated on that server
(a throwaway database, dropped after); without a URL a throwaway cluster is started.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pgcluster

from hookgate.storage.database import MIGRATIONS, Database
from hookgate.storage.head_schema import HEAD_SCHEMAS, REVISION_LINE
from hookgate.storage.schema_version import bundled_heads

#: pg_dump's lines that set its own session up rather than make the schema.
_SESSION_LINES = re.compile(r"^(SET |SELECT pg_catalog\.set_config|\\restrict|\\unrestrict)")


def head() -> str:
    heads = bundled_heads(MIGRATIONS / "versions")
    if heads is None or len(heads) != 1:
        raise SystemExit(f"the migrations must have one plain head, not {heads}")
    (revision,) = heads
    return revision


async def migrate_with_alembic(url: str, revision: str) -> None:
    """Every migration through Alembic (the head named by its id, which never takes the
    rendered schema)."""
    db = Database(url)
    try:
        await db.upgrade(revision)
    finally:
        await db.dispose()


def sqlite_statements(path: Path) -> list[str]:
    """The DDL SQLite keeps for each table, index, view and trigger, in creation order."""
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name "
                            "NOT LIKE 'sqlite_%' ORDER BY rowid").fetchall()
    return [str(sql) for (sql,) in rows]


def render_sqlite(revision: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "head.db"
        asyncio.run(migrate_with_alembic(f"sqlite+aiosqlite:///{path}", revision))
        return rendered(revision, sqlite_statements(path))


def postgresql_statements(dump: str) -> list[str]:
    """pg_dump's schema-only text as statements, its session settings dropped and names
    unqualified (the schema is made in the connection's current schema, as Alembic does)."""
    statements: list[str] = []
    lines: list[str] = []
    for line in dump.splitlines():
        if not lines and (not line.strip() or line.startswith("--")
                          or _SESSION_LINES.match(line)):
            continue
        lines.append(line.replace("public.", ""))
        if line.endswith(";"):
            statements.append("\n".join(lines)[:-1])
            lines = []
    return statements


def render_postgresql(revision: str, server_url: str) -> str:
    url = pgcluster.create_database(server_url, prefix="render_")
    try:
        asyncio.run(migrate_with_alembic(url, revision))
        libpq = re.sub(r"^postgresql\+\w+://", "postgresql://", url)
        dump = subprocess.run(["pg_dump", "--schema-only", "--no-owner", "--no-privileges",
                               "--no-comments", libpq], capture_output=True, text=True,
                              check=True).stdout
    finally:
        pgcluster.drop_database(server_url, url)
    return rendered(revision, postgresql_statements(dump))


def rendered(revision: str, statements: list[str]) -> str:
    return (f"{REVISION_LINE}{revision}\n-- Rendered by scripts/render_head_schema.py from "
            "the migrations; do not edit.\n\n" + "".join(f"{s};\n\n" for s in statements))


def main() -> None:
    revision = head()
    HEAD_SCHEMAS.mkdir(exist_ok=True)
    (HEAD_SCHEMAS / "sqlite.sql").write_text(render_sqlite(revision), encoding="utf-8")
    server = os.environ.get("HOOKGATE_TEST_POSTGRES_URL")
    if server:
        text = render_postgresql(revision, server)
    else:
        with tempfile.TemporaryDirectory() as datadir:
            url = pgcluster.start(Path(datadir))
            try:
                text = render_postgresql(revision, url)
            finally:
                pgcluster.stop(Path(datadir))
    (HEAD_SCHEMAS / "postgresql.sql").write_text(text, encoding="utf-8")
    print(f"rendered {HEAD_SCHEMAS} at {revision}")


if __name__ == "__main__":
    main()
