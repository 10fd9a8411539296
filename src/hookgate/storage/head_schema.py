"""A new, empty database made at the bundled migrations' head in one transaction, from the
DDL those migrations leave behind (rendered per dialect into ``migrations/head/``), without
importing or running Alembic; anything else (a database not empty, a file that does not name
today's head) is left to Alembic. tests/storage/test_head_schema.py checks the files."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from hookgate.storage.backends.base import Backend
from hookgate.storage.schema_version import bundled_heads

#: The rendered schemas, one file per dialect (``sqlite.sql``, ``postgresql.sql``).
HEAD_SCHEMAS = Path(__file__).with_name("migrations") / "head"
#: A rendered file's first line: the revision its statements make.
REVISION_LINE = "-- revision: "


@dataclass(frozen=True)
class HeadSchema:
    """The statements that make a dialect's schema at ``revision``."""

    revision: str
    statements: tuple[str, ...]


def parse(rendered: str) -> HeadSchema:
    """A rendered file: its revision line, then statements each ending with ``;`` at the end
    of a line (no statement holds a function body), kept as written (SQLite keeps a
    table's DDL text); blank and ``--`` lines between statements are skipped."""
    first, _, body = rendered.partition("\n")
    if not first.startswith(REVISION_LINE):
        raise ValueError(f"a rendered schema starts with {REVISION_LINE!r}")
    statements: list[str] = []
    lines: list[str] = []
    for line in body.splitlines():
        if not lines and (not line.strip() or line.startswith("--")):
            continue
        lines.append(line)
        if line.endswith(";"):
            statements.append("\n".join(lines)[:-1])
            lines = []
    if lines:
        raise ValueError("a rendered schema ends inside a statement")
    return HeadSchema(first.removeprefix(REVISION_LINE).strip(), tuple(statements))


@cache
def head_schema(dialect: str, versions: Path) -> HeadSchema | None:
    """The rendered schema of ``dialect`` when it makes the one head of the migration files
    in ``versions``; None when there is none or it is of another revision (a migration
    added since it was rendered): Alembic then makes the schema."""
    path = HEAD_SCHEMAS / f"{dialect}.sql"
    heads = bundled_heads(versions)
    if heads is None or len(heads) != 1 or not path.is_file():
        return None
    schema = parse(path.read_text(encoding="utf-8"))
    return schema if frozenset({schema.revision}) == heads else None


async def create_at_head(engine: AsyncEngine, backend: Backend, versions: Path) -> bool:
    """Make the schema at the head when the database has none: True when made here. False
    when there is no rendered schema for today's head, or the database holds any relation
    (a schema of some revision, or something else): Alembic, the authority, then decides.
    The backend's migration lock is held throughout, so a concurrent starter waits and then
    finds the schema complete."""
    schema = head_schema(backend.dialect, versions)
    if schema is None:
        return False
    async with engine.connect() as conn:
        if not await backend.begin_new_schema(conn):
            await conn.rollback()
            return False
        for statement in schema.statements:
            await conn.exec_driver_sql(statement)
        await conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:v)"),
                           {"v": schema.revision})
        await conn.commit()
    return True
