"""A fast lane to a SQLite file for the records hooks keep on every tool call.

Through SQLAlchemy and aiosqlite every statement, fetch and commit is a hop to a worker
thread, so a short transaction costs about a millisecond. The lane is one thread per
database file with its own ``sqlite3`` connection that runs a whole unit of work — a
transaction, start to commit — per hop (tens of microseconds). Writes begin with
``BEGIN IMMEDIATE``, taking SQLite's one write lock before reading anything, so they queue
behind other writers (any process) instead of failing on a stale snapshot.
"""

from __future__ import annotations

import asyncio
import sqlite3
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TypeVar

from hookgate.storage.database import Database
from hookgate.storage.statement_count import COUNT

T = TypeVar("T")

_BUSY_TIMEOUT_MS = 30_000


class SqliteLane:
    """Runs functions of a ``sqlite3.Connection`` on the lane's own thread."""

    _lanes: weakref.WeakKeyDictionary[Database, SqliteLane] = weakref.WeakKeyDictionary()

    @classmethod
    def for_database(cls, db: Database) -> SqliteLane | None:
        """The lane of ``db``'s file, or None when ``db`` is not a SQLite file."""
        lane = cls._lanes.get(db)
        if lane is None:
            path = db.engine.url.database if db.is_sqlite else None
            if not path or path == ":memory:" or path.startswith("file:"):
                return None
            lane = cls._lanes[db] = cls(path)
            weakref.finalize(db, lane.close)
        return lane

    def __init__(self, path: str) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="hookgate-sqlite-lane")
        self._conn: sqlite3.Connection | None = None

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(conn)`` outside any transaction (it sees the latest commit)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, work, False)

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(conn)`` in one IMMEDIATE transaction, committed before this returns."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, work, True)

    def _run(self, work: Callable[[sqlite3.Connection], T], transaction: bool) -> T:
        conn = self._conn or self._connect()
        if not transaction:
            return work(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = work(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def _connect(self) -> sqlite3.Connection:
        # Autocommit mode: the lane says BEGIN and COMMIT itself. The pragmas match the
        # ones database.py sets on SQLAlchemy's connections.
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000,
                               isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        if COUNT.enabled:
            conn.set_trace_callback(COUNT.statement)  # BEGIN and COMMIT included
        self._conn = conn
        return conn

    def close(self) -> None:
        try:
            self._executor.submit(self._disconnect)
        except RuntimeError:  # at interpreter exit the worker is already gone
            self._disconnect()
        self._executor.shutdown(wait=False)

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def sqlite_timestamp(at: datetime) -> str:
    """A time as SQLAlchemy stores UTCDateTime in SQLite (naive UTC, microseconds), so rows
    written by the lane read back, sort and compare like any other."""
    return at.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
