"""A fast lane to a SQLite file for the records hooks keep on every tool call.

Through SQLAlchemy and aiosqlite every statement, fetch and commit is a hop to a worker
thread, so a short transaction costs about a millisecond. The lane is one thread per
database file with its own ``sqlite3`` connection that runs a whole unit of work — a
transaction, start to commit — per hop (tens of microseconds). Writes begin with
``BEGIN IMMEDIATE``, taking SQLite's one write lock before reading anything, so they queue
behind other writers (any process) instead of failing on a stale snapshot.

Group commit: writes that arrive while the thread is busy share the next transaction, each
in a savepoint of its own (one that raises is rolled back alone), and every caller returns
only once that transaction has committed. Under concurrency a commit (and its fsync) is
paid once per group instead of once per write.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

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
        #: Writes waiting for the next group: (work, its loop, its future).
        self._queued: list[tuple[Callable[[sqlite3.Connection], Any],
                                 asyncio.AbstractEventLoop, asyncio.Future[Any]]] = []
        self._queue_lock = threading.Lock()

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(conn)`` outside any transaction (it sees the latest commit)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._read, work)

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(conn)`` in an IMMEDIATE transaction (shared with the writes queued beside
        it, in a savepoint of its own), committed before this returns."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        with self._queue_lock:
            self._queued.append((work, loop, done))
            first = len(self._queued) == 1
        if first:  # else a drain is already due and will take this write too
            self._executor.submit(self._drain)
        return await done

    def _drain(self) -> None:
        with self._queue_lock:
            group, self._queued = self._queued, []
        if not group:
            return
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn = self._conn or self._connect()
            if COUNT.enabled:
                COUNT.transaction()
            conn.execute("BEGIN IMMEDIATE")
            try:
                alone = len(group) == 1  # alone, a write needs no savepoint of its own
                outcomes.extend(_attempt(conn, work, savepoint=not alone)
                                for work, _, _ in group)
                conn.execute("ROLLBACK" if alone and not outcomes[0][0] else "COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except BaseException as exc:  # nothing of the group is stored: all of it failed
            failure = exc if isinstance(exc, Exception) else RuntimeError(
                f"the SQLite lane stopped: {exc!r}")
            outcomes = [(False, failure)] * len(group)
        for (_, loop, done), (ok, value) in zip(group, outcomes, strict=True):
            loop.call_soon_threadsafe(_settle, done, ok, value)

    def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return work(self._conn or self._connect())

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
        """Stop the lane: its database is gone. This runs from a finalizer, that is wherever
        the garbage collector happened to run — possibly inside another executor's
        ``submit``, which holds a lock of the whole process — so it submits nothing (that
        deadlocked): the worker thread ends once idle, and the connection (made with
        ``check_same_thread=False``) is closed here; no work of a collected database is
        left to use it."""
        self._executor.shutdown(wait=False)
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _attempt(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], Any], *,
             savepoint: bool) -> tuple[bool, Any]:
    """(True, result), or (False, what ``work`` raised, its writes undone with its
    savepoint). Anything it raises is its caller's (a Fenced included), not the group's."""
    if savepoint:
        conn.execute("SAVEPOINT lane_write")
    try:
        result = work(conn)
    except BaseException as exc:
        if savepoint:
            conn.execute("ROLLBACK TO lane_write")
            conn.execute("RELEASE lane_write")
        return False, exc
    if savepoint:
        conn.execute("RELEASE lane_write")
    return True, result


def _settle(done: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if done.done():  # the caller was cancelled; what it wrote is committed all the same
        return
    if ok:
        done.set_result(value)
    else:
        done.set_exception(value)


def sqlite_timestamp(at: datetime) -> str:
    """A time as SQLAlchemy stores UTCDateTime in SQLite (naive UTC, microseconds), so rows
    written by the lane read back, sort and compare like any other."""
    return at.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
