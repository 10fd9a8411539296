"""A fast driver path to a SQLite file (the SQLite backend's connection path) for the run layer's
and the hooks' hot statements.

Through SQLAlchemy and aiosqlite every statement, fetch and commit is a hop to a worker
thread, so a short transaction costs about a millisecond. The driver is one thread per
database file with its own ``sqlite3`` connection that runs a whole unit of work — a
transaction, start to commit — per hop (tens of microseconds). Writes begin with
``BEGIN IMMEDIATE``, taking SQLite's one write lock before reading anything, so they queue
behind other writers (any process) instead of failing on a stale snapshot.

Group commit: writes that arrive while the thread is busy share the next transaction, each
in a savepoint of its own (one that raises is rolled back alone), and every caller returns
only once that transaction has committed. Under concurrency a commit (and its fsync) is
paid once per group instead of once per write.

Inline: a hop to the thread and back (two thread switches and a wake-up of the event loop)
costs more than the statement it carries — a primary-key read or a one-row write in WAL
mode with ``synchronous=NORMAL`` takes microseconds and no fsync. So the calling thread
first tries the work on a connection of its own: a read always (WAL readers never wait for
writers), a write when it can take the write lock at once (``BEGIN IMMEDIATE`` with no busy
wait) and no group is waiting on the driver thread. Only a write that would wait for another
writer (another process, or the driver's own group) goes to the thread, so the event loop
never blocks on a lock. The WAL is checkpointed on a thread of its own
(``sqlite_checkpoint.WalCheckpointer``, decision record 0043), not by the commit that takes
it past 1,000 pages as SQLite does by itself: while that checkpointer starts the log again,
writes queue on the driver's thread and wait for it there.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TypeVar

from hookgate.storage.backends.base import NOT_NOW, NotNow
from hookgate.storage.backends.sqlite_checkpoint import SAFETY_NET_PAGES, WalCheckpointer
from hookgate.storage.statement_count import COUNT

T = TypeVar("T")

_BUSY_TIMEOUT_MS = 30_000


__all__ = ["NOT_NOW", "NotNow", "SqliteDriver", "sqlite_timestamp"]


class SqliteDriver:
    """Runs functions of a ``sqlite3.Connection`` on the driver's own thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="hookgate-sqlite-driver")
        self._conn: sqlite3.Connection | None = None
        #: Writes waiting for the next group: (work, its loop, its future).
        self._queued: list[tuple[Callable[[sqlite3.Connection], Any],
                                 asyncio.AbstractEventLoop, asyncio.Future[Any]]] = []
        self._queue_lock = threading.Lock()
        #: Each calling thread's own connection (made there; used only there).
        self._local = threading.local()
        self._closed = False
        #: Checkpoints the WAL off the writers' path (decision record 0043).
        self.checkpointer = WalCheckpointer(path)

    async def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(conn)`` outside any transaction (it sees the latest commit)."""
        conn = self._inline()
        if conn is not None:
            try:
                return work(conn)
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
                # A reader waits only in rare moments (WAL recovery): wait on the thread.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._read, work)

    def write_now(self, work: Callable[[sqlite3.Connection], T]) -> T | NotNow:
        """``work(conn)`` committed on the calling thread, if the write lock is free this
        instant and no group is waiting; else ``NOT_NOW`` (and nothing was done). No await:
        a caller that needs no task of its own to write can return without one."""
        conn = None if self._queued or self.checkpointer.restart_due else self._inline()
        if conn is not None and _begin_now(conn):
            return self._write_inline(conn, work)
        return NOT_NOW

    async def write_one(self, sql: str, params: Sequence[Any]) -> int:
        """One write statement (no ``RETURNING``) committed before this returns; the rows it
        changed. On the calling thread it runs alone in SQLite's autocommit mode: the
        statement takes the write lock as it starts (a write never reads a stale snapshot)
        and commits as it ends, with the same commit (WAL frames, ``synchronous``) that a
        ``BEGIN IMMEDIATE`` … ``COMMIT`` around it makes, for two statements less. Busy, it
        did nothing and goes to the driver's thread as any write (decision record 0027)."""
        conn = None if self._queued or self.checkpointer.restart_due else self._inline()
        if conn is not None:
            try:
                changed = conn.execute(sql, params).rowcount
            except sqlite3.OperationalError as exc:
                if not _busy(exc):
                    raise
            else:
                if COUNT.enabled:
                    COUNT.transaction()
                self.checkpointer.committed()
                return changed
        return await self.write(lambda c: c.execute(sql, params).rowcount)

    async def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(conn)`` in an IMMEDIATE transaction (shared with the writes queued beside
        it, in a savepoint of its own), committed before this returns."""
        now = self.write_now(work)
        if not isinstance(now, NotNow):
            return now
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
            self.checkpointer.wait_for_restart()
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
                f"the SQLite driver stopped: {exc!r}")
            outcomes = [(False, failure)] * len(group)
        else:
            self.checkpointer.committed()
        for (_, loop, done), (ok, value) in zip(group, outcomes, strict=True):
            loop.call_soon_threadsafe(_settle, done, ok, value)

    def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return work(self._conn or self._connect())

    def _write_inline(self, conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]
                      ) -> T:
        """``work`` in the transaction ``_begin_now`` opened on ``conn``, then committed."""
        if COUNT.enabled:
            COUNT.transaction()
        try:
            result = work(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self.checkpointer.committed()
        return result

    def _inline(self) -> sqlite3.Connection | None:
        """The calling thread's own connection (made on first use); None once closed, and
        for a file not in WAL mode (there a reader can wait for a writer, and every commit
        fsyncs)."""
        if self._closed or self._local.__dict__.get("off"):
            return None
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=0)
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                conn.close()
                self._local.off = True
                return None
            conn.execute("PRAGMA busy_timeout=0")  # never wait on the caller's thread
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")
            if COUNT.enabled:
                conn.set_trace_callback(COUNT.statement)
            self._local.conn = conn
        return conn

    def _connect(self) -> sqlite3.Connection:
        # Autocommit mode: the driver says BEGIN and COMMIT itself. The pragmas match the
        # ones database.py sets on SQLAlchemy's connections.
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000,
                               isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")
        if COUNT.enabled:
            conn.set_trace_callback(COUNT.statement)  # BEGIN and COMMIT included
        self._conn = conn
        return conn

    def close(self) -> None:
        """Stop the driver: its database is gone. This runs from a finalizer, that is wherever
        the garbage collector happened to run — possibly inside another executor's
        ``submit``, which holds a lock of the whole process — so it submits nothing (that
        deadlocked): the worker thread ends once idle, and the connection (made with
        ``check_same_thread=False``) is closed here; no work of a collected database is
        left to use it."""
        self._closed = True
        self._executor.shutdown(wait=False)
        self.checkpointer.close()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _busy(exc: sqlite3.OperationalError) -> bool:
    """The error of a statement that would have had to wait for a lock."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def _begin_now(conn: sqlite3.Connection) -> bool:
    """Take the write lock on ``conn`` if it is free this instant."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if _busy(exc):
            return False
        raise
    return True


def _attempt(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], Any], *,
             savepoint: bool) -> tuple[bool, Any]:
    """(True, result), or (False, what ``work`` raised, its writes undone with its
    savepoint). Anything it raises is its caller's (a Fenced included), not the group's."""
    if savepoint:
        conn.execute("SAVEPOINT driver_write")
    try:
        result = work(conn)
    except BaseException as exc:
        if savepoint:
            conn.execute("ROLLBACK TO driver_write")
            conn.execute("RELEASE driver_write")
        return False, exc
    if savepoint:
        conn.execute("RELEASE driver_write")
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
    written by the driver read back, sort and compare like any other."""
    if at.tzinfo is not UTC:  # a time already in UTC (every write's `utcnow`) needs no shift
        at = at.astimezone(UTC)
    return at.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
