"""Storage backends: one object per database, chosen once from its URL when the Database is
built (``Database.backend``). Each owns its fast connection path and runs the hot statements
(compiled once per dialect, statements.py) on it; only this package knows which database
it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hookgate.storage.backends.base import Backend

if TYPE_CHECKING:
    from hookgate.storage.database import Database

__all__ = ["Backend", "backend_for", "engine_options", "prepare_engine"]


def _embedded(url: str) -> bool:
    return url.startswith("sqlite")


def engine_options(url: str) -> dict[str, Any]:
    """SQLAlchemy engine options for the database at ``url`` (normalised)."""
    if _embedded(url):
        return {"connect_args": {"timeout": 30}}
    # At most POOL_SIZE connections, all kept open once made: connections "beyond the pool"
    # (max_overflow) are closed whenever they are handed back, and under load each checkout
    # then opens a new one (bench/throughput.py at concurrency 64: a new connection every
    # eighth run, 26% fewer runs/s than without).
    return {"pool_size": POOL_SIZE, "max_overflow": 0}


#: The SQLAlchemy pool's connections per process on PostgreSQL (requests beyond wait).
POOL_SIZE = 30


def prepare_engine(url: str, engine: Any) -> None:
    """Per-connection settings: SQLite's pragmas (WAL, foreign keys, busy timeout)."""
    if _embedded(url):
        from sqlalchemy import event

        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)


def reads_in_autocommit(url: str) -> bool:
    """Whether one-statement reads run without BEGIN/ROLLBACK (PostgreSQL: two round trips
    fewer, and psycopg keeps its prepared statements, which a ROLLBACK deallocates)."""
    return not _embedded(url)


def backend_for(db: Database) -> Backend:
    """The backend of ``db``: SQLite (a file or in memory) or PostgreSQL."""
    if _embedded(db.url):
        from hookgate.storage.backends.sqlite import SqliteBackend

        return SqliteBackend(db)
    from hookgate.storage.backends.postgresql import PostgresBackend

    return PostgresBackend(db)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()
