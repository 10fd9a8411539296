"""Alembic environment: hookgate always hands in a live connection (see database.py)."""

from __future__ import annotations

from alembic import context

from hookgate.storage.tables import Base

target_metadata = Base.metadata
connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with `hookgate db upgrade` (it provides the connection)")

context.configure(
    connection=connection,
    target_metadata=target_metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
