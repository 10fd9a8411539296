"""Storage backends: one object per database, chosen once from its URL when the Database is
built (``Database.backend``). Each owns its fast connection path and runs the hot statements
(compiled once per dialect, statements.py) on it; only this package knows which database
it is.
"""

from __future__ import annotations

from hookgate.storage.backends.base import Backend
from hookgate.storage.backends.postgresql import POOL_SIZE, PostgresBackend
from hookgate.storage.backends.sqlite import SqliteBackend

__all__ = ["POOL_SIZE", "Backend", "PostgresBackend", "SqliteBackend", "backend_class"]


def backend_class(url: str) -> type[SqliteBackend] | type[PostgresBackend]:
    """The backend of the database at ``url`` (normalised: ``sqlite+aiosqlite://`` or
    ``postgresql+psycopg://``): the one place that tells them apart."""
    return SqliteBackend if url.startswith("sqlite") else PostgresBackend
