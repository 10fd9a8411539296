"""The PostgreSQL driver's own connections: reused across statements, never more than
OWN_CONNECTIONS per event loop (concurrent work beyond them waits a moment for one, then
borrows from the pool and still runs), a connection that breaks fails its statement and
is replaced, one left inside a transaction is not reused, and disposing the database
closes them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import psycopg
import pytest

from hookgate.storage.backends import pg_driver
from hookgate.storage.backends.pg_driver import OWN_CONNECTIONS, PgDriver
from hookgate.storage.database import Database
from tests.conftest import _fresh_pg_database


@pytest.fixture
def pg_url(postgres_server_url: str) -> str:
    return _fresh_pg_database(postgres_server_url)


@pytest.fixture
async def pg(pg_url: str) -> AsyncIterator[tuple[Database, PgDriver]]:
    db = Database(pg_url)
    driver = db.backend.driver
    assert isinstance(driver, PgDriver)
    try:
        yield db, driver
    finally:
        await db.dispose()


#: The test's own look at the server: its backends (one of an earlier look may still be
#: exiting) are not the driver's.
_LOOK = "hookgate-test-look"


async def _backends(db: Database) -> set[int]:
    admin = await psycopg.AsyncConnection.connect(db.libpq_url, autocommit=True,
                                                  application_name=_LOOK)
    async with admin:
        rows = await (await admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name <> %s", (_LOOK,))).fetchall()
    return {r[0] for r in rows}


@pytest.mark.perf  # how many connections: a performance internal
async def test_statements_reuse_the_drivers_own_connections(
        pg: tuple[Database, PgDriver]) -> None:
    _db, driver = pg
    pids = {(await driver.fetchrow("SELECT pg_backend_pid()"))[0] for _ in range(20)}
    assert len(pids) == 1  # one after the other: the same connection every time
    # Concurrent statements beyond the driver's own connections wait a moment for one to
    # come back rather than borrow a costlier one from the pool.
    many = await asyncio.gather(*(driver.fetchrow("SELECT pg_backend_pid(), pg_sleep(0.05)")
                                  for _ in range(OWN_CONNECTIONS + 4)))
    assert len(many) == OWN_CONNECTIONS + 4
    assert len({r[0] for r in many}) == OWN_CONNECTIONS
    again = {(await driver.fetchrow("SELECT pg_backend_pid()"))[0] for _ in range(20)}
    assert len(again) == 1


@pytest.mark.perf  # how many connections: a performance internal
async def test_a_statement_that_would_wait_too_long_borrows_from_the_pool(
        pg: tuple[Database, PgDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    _db, driver = pg
    monkeypatch.setattr(pg_driver, "OWN_WAIT_S", 0.02)
    many = await asyncio.gather(*(driver.fetchrow("SELECT pg_backend_pid(), pg_sleep(0.3)")
                                  for _ in range(OWN_CONNECTIONS + 4)))
    assert len({r[0] for r in many}) == OWN_CONNECTIONS + 4  # 4 borrowed ones


async def test_work_holding_every_own_connection_still_gets_one_more(
        pg: tuple[Database, PgDriver], monkeypatch: pytest.MonkeyPatch) -> None:
    # The wait is bounded: a unit of work that needs a connection while it (or whatever
    # it waits for) holds all of the driver's own cannot deadlock; it borrows one.
    _db, driver = pg
    monkeypatch.setattr(pg_driver, "OWN_WAIT_S", 0.05)
    async with contextlib.AsyncExitStack() as stack:
        held = [await stack.enter_async_context(driver.connection())
                for _ in range(OWN_CONNECTIONS)]
        held_pids = {(await c.fetchrow("SELECT pg_backend_pid()"))[0] for c in held}
        assert len(held_pids) == OWN_CONNECTIONS
        extra = await asyncio.wait_for(driver.fetchrow("SELECT pg_backend_pid()"), 5)
        assert extra[0] not in held_pids
        # A waiter cancelled while it waits takes no connection with it.
        waiting = asyncio.ensure_future(driver.fetchrow("SELECT 1"))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    own = driver._own_pool()
    assert own.open == OWN_CONNECTIONS and len(own.idle) == OWN_CONNECTIONS
    assert not [w for w in own.waiters if not w.done()]
    pids = {(await driver.fetchrow("SELECT pg_backend_pid()"))[0] for _ in range(5)}
    assert pids <= held_pids


async def test_a_broken_connection_fails_its_statement_and_is_replaced(
        pg: tuple[Database, PgDriver]) -> None:
    db, driver = pg
    await asyncio.gather(*(driver.fetchrow("SELECT pg_sleep(0.02)") for _ in range(3)))
    pids = await _backends(db)
    assert len(pids) >= 3
    admin = await psycopg.AsyncConnection.connect(db.libpq_url, autocommit=True)
    async with admin:  # as a server restart would: every connection goes
        for pid in pids:
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # asyncpg notices a server's goodbye on an idle connection and drops it; if the next
    # statement was already on its way, that one statement fails (fail closed) instead.
    try:
        first = (await driver.fetchrow("SELECT pg_backend_pid()"))[0]
    except (asyncpg.exceptions.ConnectionDoesNotExistError, asyncpg.InterfaceError,
            asyncpg.exceptions.InternalClientError):
        first = None
    assert first not in pids
    # At most one failure, not one per connection: the others were dropped with it.
    fresh = (await driver.fetchrow("SELECT pg_backend_pid()"))[0]
    assert fresh not in pids
    assert (await driver.fetchrow("SELECT 41 + 1"))[0] == 42


async def test_a_connection_left_in_a_transaction_is_not_reused(
        pg: tuple[Database, PgDriver]) -> None:
    _db, driver = pg
    async with driver.connection() as conn:
        pid = (await conn.fetchrow("SELECT pg_backend_pid()"))[0]
        await conn.execute("BEGIN")  # a caller that left a transaction open
    assert (await driver.fetchrow("SELECT pg_backend_pid()"))[0] != pid
    # A unit of work that raises rolls back and its connection serves the next one.
    with pytest.raises(ZeroDivisionError):
        async with driver.transaction() as conn:
            await conn.execute("CREATE TABLE driver_t (k int)")
            1 / 0  # noqa: B018
    assert (await driver.fetchrow("SELECT to_regclass('driver_t') IS NULL"))[0] is True
    # A statement cancelled half-way: its connection is not handed to the next caller.
    slow = asyncio.ensure_future(driver.fetchrow("SELECT pg_backend_pid(), pg_sleep(5)"))
    await asyncio.sleep(0.2)
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    assert (await driver.fetchrow("SELECT 7"))[0] == 7


async def test_dispose_closes_the_drivers_connections(pg_url: str) -> None:
    db = Database(pg_url)
    driver = db.backend.driver
    assert isinstance(driver, PgDriver)
    await asyncio.gather(*(driver.fetchrow("SELECT pg_sleep(0.02)") for _ in range(3)))
    assert len(await _backends(db)) >= 3
    await db.dispose()
    left = await _backends(db)
    for _ in range(250):  # the server notices the closed sockets at once or nearly
        if not left:
            break
        await asyncio.sleep(0.02)
        left = await _backends(db)
    assert left == set()


async def test_a_value_the_driver_cannot_send_is_not_repeated_in_the_error(
        pg: tuple[Database, PgDriver]) -> None:
    # A database error's text reaches run errors and API answers: asyncpg's words for an
    # argument it cannot encode quote the argument (here a card number with a lone
    # surrogate); the driver's error says which argument and why, without the value.
    _db, driver = pg
    with pytest.raises(asyncpg.exceptions.DataError) as raised:
        await driver.fetchrow("SELECT $1::text", "card 4111 1111 1111 1111 \ud83d")
    text = str(raised.value)
    assert "4111" not in text and "query argument $1" in text and "surrogates" in text
    assert (await driver.fetchrow("SELECT 1"))[0] == 1  # the connection is still good


@pytest.mark.perf  # how statements are planned: a performance internal
async def test_the_drivers_own_connections_plan_each_statement_once(
        pg: tuple[Database, PgDriver]) -> None:
    """The carrying checkpoint's custom plan cost 0.37 ms per execution against 0.15 ms for
    its generic plan (docs/decisions/0011): the driver's own connections reuse it."""
    _db, driver = pg
    settings = {(await driver.fetchrow("SHOW plan_cache_mode"))[0] for _ in range(3)}
    assert settings == {"force_generic_plan"}
