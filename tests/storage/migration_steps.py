"""What the migration tests share: a step down the bundled migrations on a connection, and
a table's columns as the database lists them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from hookgate.storage.database import Database, alembic_config


def downgrade(conn: Any, revision: str) -> None:
    """Run the bundled migrations down to ``revision`` on ``conn`` (for ``run_sync``)."""
    from alembic import command

    cfg = alembic_config()
    cfg.attributes["connection"] = conn
    command.downgrade(cfg, revision)


async def columns(db: Database, table: str) -> list[str]:
    """``table``'s column names, from SQLite's or PostgreSQL's own catalogue."""
    async with db.engine.connect() as conn:
        return list((await conn.execute(text(
            "SELECT name FROM pragma_table_info(:t)" if db.backend.dialect == "sqlite" else
            "SELECT column_name FROM information_schema.columns WHERE table_name = :t"),
            {"t": table})).scalars())
