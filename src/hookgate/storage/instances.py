"""How many instances a database serves: a SQLite file one process (API and worker
together, runs advanced in process), PostgreSQL any number (runs as queued jobs, changes
carried between instances by notifications). The runtime builds itself from this answer."""

from __future__ import annotations

from hookgate.storage.database import Database


def shared_by_instances(db: Database) -> bool:
    """Whether several instances may serve ``db`` (PostgreSQL), or one process owns it."""
    return not db.backend.in_process
