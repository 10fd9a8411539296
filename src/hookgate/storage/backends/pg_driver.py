"""A lean driver to PostgreSQL (the PostgreSQL backend's connection path) for the run layer's
and the hooks' hot statements.

Through SQLAlchemy a one-row read is a checkout, a BEGIN, the statement and a ROLLBACK —
three round trips plus about a hundred microseconds of Python per statement. The driver
talks to the driver directly: a single statement runs in autocommit (one round trip, no
BEGIN), a unit of work runs in one explicit transaction, and each statement text is
prepared once per connection and reused. Statements use PostgreSQL's ``$n`` parameters.

A checkout from SQLAlchemy's pool and switching the connection into autocommit and back
costs as much as the round trip itself, so the driver keeps a few connections of its own per
event loop (``OWN_CONNECTIONS``), made with asyncpg: its protocol runs in compiled code and
keeps each statement prepared per connection, and a round trip costs about half the CPU of
psycopg's (asyncpg is outside a transaction unless asked, like autocommit). When all of
them are busy a statement waits a moment (``OWN_WAIT_S``) for one to come back, then
borrows from SQLAlchemy's pool (psycopg): the wait is bounded, so a unit of work that
needs a second connection while it holds one (or a lock another holder waits for) cannot
deadlock, and under load the statements queue for the cheap connections instead of
paying psycopg's cost (at 64 concurrent runs, borrowing took 1.3 ms of the server's CPU
per run). Statements therefore cast the parameters whose type PostgreSQL
cannot infer (those in a SELECT list), which asyncpg needs. A connection that breaks, or
comes back inside a transaction, is closed and not reused.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from hookgate.storage.statement_count import COUNT

if TYPE_CHECKING:
    from hookgate.storage.database import Database

#: Connections the driver opens itself, per event loop; beyond them it borrows from the pool.
OWN_CONNECTIONS = 8
#: How long a statement waits for one of them to come back before it borrows from the pool.
OWN_WAIT_S = 0.5


class PgDriver:
    """Single statements and short transactions on raw connections: the driver's own asyncpg
    ones, else psycopg ones borrowed from ``db``'s pool."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._own: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Own] = (
            weakref.WeakKeyDictionary())
        db.on_dispose(self.close)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """A raw connection: one of the driver's own when one is free, else one borrowed
        from SQLAlchemy's pool (which began no transaction on it, so its reset on return
        is a no-op)."""
        own = self._own_pool()
        mine = await own.take(self.db)
        if mine is not None:
            try:
                yield _Counted(mine) if COUNT.enabled else mine
            except BaseException as exc:
                _let_go(own, mine, exc)
                raise
            own.give_back(mine)
            return
        async with self.db.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            driver: Any = raw.driver_connection
            if self.db.engine.dialect.driver == "psycopg":
                async with _Psycopg.autocommitting(driver) as adapted:
                    yield _Counted(adapted) if COUNT.enabled else adapted
                return
            yield _Counted(driver) if COUNT.enabled else driver

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        """One statement in autocommit; its first row, or None."""
        return await self._single("fetchrow", sql, args)

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        """One statement in autocommit; all its rows."""
        return list(await self._single("fetch", sql, args))

    async def execute(self, sql: str, *args: Any) -> str:
        """One statement in autocommit; its status ("INSERT 0 1", …)."""
        return str(await self._single("execute", sql, args))

    async def _single(self, method: str, sql: str, args: tuple[Any, ...]) -> Any:
        """One statement on an idle connection of the driver's own, without the context
        manager `connection` wraps around a unit of work (its generator and two awaits per
        statement: six statements per run; decision record 0035), and with the same
        handling of its errors; else as `connection` gives one."""
        own = self._own_pool()
        mine = own.idle_one()
        if mine is None:
            async with self.connection() as conn:
                return await getattr(conn, method)(sql, *args)
        if COUNT.enabled:  # a statement outside a transaction is one of its own
            COUNT.statement()
            COUNT.transaction()
        try:
            found = await getattr(mine, method)(sql, *args)
        except BaseException as exc:
            _let_go(own, mine, exc)
            raise
        own.give_back(mine)
        return found

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """A connection inside one transaction, committed when the block ends cleanly and
        rolled back when it raises."""
        async with self.connection() as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def work_transaction(self) -> AsyncIterator[DriverTransaction]:
        """A `DriverTransaction`: ``BEGIN`` on one connection, then its statements; on a
        clean exit the notifications it queued and ``COMMIT`` in one round trip, then its
        after-commit callbacks; on an error ``ROLLBACK`` (or the connection closed) and
        nothing after. A failed commit raises: nothing ran after it."""
        failed: Exception | None = None
        async with self.connection() as conn:
            # BEGIN, COMMIT and ROLLBACK are the transaction's, not statements to count.
            plain = conn._conn if isinstance(conn, _Counted) else conn
            if COUNT.enabled:
                COUNT.transaction()
            await plain.execute("BEGIN")
            tx = DriverTransaction(conn)
            try:
                yield tx
            except Exception as exc:
                # Rolled back, the connection serves the next transaction (a refused vote
                # or rule); one that cannot roll back, or a cancelled transaction (maybe
                # mid-statement), is closed (connection()).
                await plain.execute("ROLLBACK")
                failed = exc
            else:
                await plain.execute(tx.commit_script())
        if failed is not None:
            raise failed
        tx.committed()

    def _own_pool(self) -> _Own:
        loop = asyncio.get_running_loop()
        own = self._own.get(loop)
        if own is None:
            own = self._own[loop] = _Own()
        return own

    async def close(self) -> None:
        """Close the driver's own connections (``Database.dispose`` calls this)."""
        pools, self._own = list(self._own.values()), weakref.WeakKeyDictionary()
        for own in pools:
            await own.close()


def _let_go(own: _Own, conn: Any, exc: BaseException) -> None:
    """After ``exc`` ended ``conn``'s use: a refusal by the server gives the connection back
    as it was and raises ``exc`` without the values it quoted; anything else (cancelled
    mid-statement, a broken link, the caller's own error inside a unit of work) leaves the
    connection's state unknown, so it goes, and with a broken link the idle ones too (the
    server likely dropped them all). The caller raises ``exc`` afterwards."""
    import asyncpg  # type: ignore[import-untyped]

    if isinstance(exc, asyncpg.PostgresError):
        own.give_back(conn)
        clean = without_values(exc)
        if clean is not exc:
            raise clean from None
        return
    own.discard(conn, everyone=conn.is_closed() or isinstance(
        exc, OSError | asyncpg.InterfaceError | asyncpg.InternalClientError))


class DriverTransaction:
    """An open transaction on one of the driver's connections, as the work that commits
    with it sees it (``storage.transaction.Transaction``): its statements (``$n``
    parameters, in the transaction), notifications sent with its ``COMMIT``, and callbacks
    run once that committed (not if it rolls back)."""

    __slots__ = ("_after", "_notes", "conn", "published")

    def __init__(self, conn: Any) -> None:
        #: The connection, inside the transaction: ``fetchrow``, ``fetch``, ``execute``.
        self.conn = conn
        self._notes: list[tuple[str, str]] = []
        self._after: list[Callable[[], None]] = []
        #: Wake-ups a publisher (Redis) carries once the transaction committed.
        self.published: list[tuple[str, str]] = []

    def notify(self, channel: str, payload: str) -> None:
        """NOTIFY ``channel`` with ``payload`` at the commit (sent with the ``COMMIT``)."""
        self._notes.append((_literal(channel), _literal(payload)))

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the transaction committed; it should only schedule work."""
        self._after.append(callback)

    def commit_script(self) -> str:
        """The ``COMMIT``, after the queued notifications: one simple-protocol message, one
        round trip (a NOTIFY is delivered at the commit whichever statement sent it)."""
        if not self._notes:
            return "COMMIT"
        notes = "; ".join(f"SELECT pg_notify({c}, {p})" for c, p in self._notes)
        if COUNT.enabled:
            for _ in self._notes:
                COUNT.statement()
        return f"{notes}; COMMIT"

    def committed(self) -> None:
        for callback in self._after:
            callback()


def _literal(text: str) -> str:
    """``text`` as an escape-string literal (``E'…'``: read alike whatever
    ``standard_conforming_strings`` says); a NUL, which no text value holds, is refused."""
    if "\x00" in text:
        raise ValueError("a notification cannot carry a NUL character")
    return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


#: asyncpg's words for a parameter it could not encode; the value follows them.
_BAD_ARGUMENT = re.compile(r"^(invalid input for query argument \$\d+): .* \((.*)\)$", re.S)


def without_values(exc: Exception) -> Exception:
    """``exc`` without the parameter values asyncpg puts in a message about a parameter it
    could not encode (a tool's arguments, a card number): a database error's text reaches
    run errors, observations and API answers. Quoted values in the reason go too."""
    found = _BAD_ARGUMENT.match(str(exc))
    if found is None:
        return exc
    reason = re.sub(r"(?<!\w)'[^']*'(?!\w)", "'…'", found.group(2))
    return type(exc)(f"{found.group(1)} ({reason})")


#: The driver's own connections plan each statement once: its statements are a fixed set
#: of key lookups and writes (see statements.py), whose generic plan is the one a custom
#: plan would pick, and a custom plan costs the planning of a CTE statement (~0.2-0.3 ms of
#: the server's CPU) on every execution of a checkpoint.
SESSION_SETTINGS = {"plan_cache_mode": "force_generic_plan"}


class _Own:
    """The driver's own asyncpg connections on one event loop: idle ones, and how many are
    open."""

    def __init__(self) -> None:
        self.idle: list[Any] = []
        self.open = 0
        #: Statements waiting for a connection to come back, first come first served.
        self.waiters: deque[asyncio.Future[Any]] = deque()

    async def take(self, db: Database) -> Any:
        """An idle connection, a new one while fewer than OWN_CONNECTIONS are open, else
        one given back within OWN_WAIT_S, else None (the caller borrows from the pool)."""
        conn = self.idle_one()
        if conn is not None:
            return conn
        if self.open >= OWN_CONNECTIONS:
            return await self._wait()
        import asyncpg

        self.open += 1
        try:
            return await asyncpg.connect(db.libpq_url, server_settings=SESSION_SETTINGS)
        except BaseException:
            self.open -= 1
            raise

    def idle_one(self) -> Any:
        """An idle connection, or None."""
        while self.idle:
            conn = self.idle.pop()
            if not conn.is_closed():
                return conn
            self.open -= 1
        return None

    async def _wait(self) -> Any:
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        try:
            async with asyncio.timeout(OWN_WAIT_S):
                return await waiter
        except TimeoutError:
            pass
        except BaseException:
            # Cancelled: a connection handed over in the same instant goes back.
            if waiter.done() and not waiter.cancelled():
                self.give_back(waiter.result())
            else:
                waiter.cancel()
            raise
        if waiter.done() and not waiter.cancelled():
            return waiter.result()  # handed over as the wait ran out
        waiter.cancel()  # give_back skips it
        return None

    def give_back(self, conn: Any) -> None:
        if conn.is_closed() or conn.is_in_transaction():
            # Not reusable: a broken link or a transaction left open.
            self.discard(conn, everyone=conn.is_closed())
            return
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        self.idle.append(conn)

    def discard(self, conn: Any, *, everyone: bool = False) -> None:
        """Close ``conn``; with ``everyone`` (its link broke: the server likely went away
        for all of them, as in a restart) the idle ones too, as SQLAlchemy's pool does, so
        one statement fails, not one per connection."""
        self.open -= 1
        conn.terminate()
        if everyone:
            idle, self.idle = self.idle, []
            self.open -= len(idle)
            for other in idle:
                other.terminate()

    async def close(self) -> None:
        while self.waiters:  # they borrow from the pool instead
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        idle, self.idle = self.idle, []
        for conn in idle:
            self.open -= 1
            try:
                await asyncio.wait_for(conn.close(), 5)
            except (RuntimeError, OSError, TimeoutError):
                conn.terminate()  # made on another event loop, now gone: drop the socket


class _Counted:
    """A driver connection whose statements and transactions bench/throughput.py counts (a
    statement outside a transaction is one of its own: autocommit)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def _count(self) -> None:
        COUNT.statement()
        if not self._conn.is_in_transaction():
            COUNT.transaction()

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        self._count()
        return await self._conn.fetchrow(sql, *args)

    async def fetch(self, sql: str, *args: Any) -> Any:
        self._count()
        return await self._conn.fetch(sql, *args)

    async def execute(self, sql: str, *args: Any) -> Any:
        self._count()
        return await self._conn.execute(sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        self._count()
        return await self._conn.executemany(sql, rows)

    def is_in_transaction(self) -> bool:
        return bool(self._conn.is_in_transaction())

    def transaction(self) -> Any:
        COUNT.transaction()
        return self._conn.transaction()


def psycopg_statements(conn: Any) -> _Psycopg:
    """The driver's statements (``$n`` parameters, prepared once per connection) on a psycopg
    connection the caller holds, inside whatever transaction it has open."""
    return _Psycopg(conn)


def counted_psycopg_statements(conn: Any) -> Any:
    """`psycopg_statements`, each statement counted as SQLAlchemy's are (bench/throughput.py)
    when counting is on."""
    return _Counted(_Psycopg(conn)) if COUNT.enabled else _Psycopg(conn)


class _Psycopg:
    """asyncpg's few connection methods the driver's users call, on a psycopg connection:
    ``$n`` parameters (a raw cursor), statements prepared once per connection, autocommit
    for single statements and an explicit transaction for units of work."""

    def __init__(self, conn: Any) -> None:
        import psycopg  # only for PostgreSQL: a SQLite deployment never loads the driver

        self._conn = conn
        self._psycopg = psycopg

    @classmethod
    @asynccontextmanager
    async def autocommitting(cls, conn: Any) -> AsyncIterator[_Psycopg]:
        # The pool hands the connection over idle; it goes back idle and out of autocommit.
        await conn.set_autocommit(True)
        try:
            yield cls(conn)
        finally:
            await conn.set_autocommit(False)

    async def fetchrow(self, sql: str, *args: Any) -> Any:
        async with self._psycopg.AsyncRawCursor(self._conn) as cur:
            await cur.execute(sql, args, prepare=True)
            return await cur.fetchone()

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        async with self._psycopg.AsyncRawCursor(self._conn) as cur:
            await cur.execute(sql, args, prepare=True)
            return await cur.fetchall()

    async def execute(self, sql: str, *args: Any) -> str:
        async with self._psycopg.AsyncRawCursor(self._conn) as cur:
            if args:
                await cur.execute(sql, args, prepare=True)
            else:  # the simple protocol, as asyncpg's: several statements may be sent
                await cur.execute(sql, None, prepare=False)
            return str(cur.statusmessage)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        async with self._psycopg.AsyncRawCursor(self._conn) as cur:
            await cur.executemany(sql, rows)

    def transaction(self) -> Any:
        return self._conn.transaction()

    def is_in_transaction(self) -> bool:
        return bool(self._conn.info.transaction_status
                    != self._psycopg.pq.TransactionStatus.IDLE)
