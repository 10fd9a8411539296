"""How many instances a database serves: a SQLite file one process (API and worker
together, runs advanced in process), PostgreSQL any number (runs as queued jobs, changes
carried between instances by notifications). The runtime builds itself from this answer."""

from __future__ import annotations

from hookgate.storage.backends import backend_class
from hookgate.storage.database import Database, normalised_url


def shared_by_instances(db: Database) -> bool:
    """Whether several instances may serve ``db`` (PostgreSQL), or one process owns it."""
    return not db.backend.in_process


def url_shared_by_instances(url: str) -> bool:
    """`shared_by_instances` of the database at ``url``, known before it is opened."""
    return not backend_class(normalised_url(url)).in_process
