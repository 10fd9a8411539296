"""The PostgreSQL wake-up subscription (runs/notifications.py Notifications) hands every
notification to its handlers, and when its connection is killed it connects again and tells
every handler to read again (None): nothing missed meanwhile goes unread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg  # type: ignore[import-untyped]
import pytest

from hookgate.runs.notifications import APPLICATION_NAME, Notifications
from hookgate.storage.database import Database


class Seen:
    """A handler that remembers its payloads and lets a test wait for them."""

    def __init__(self) -> None:
        self.items: list[str | None] = []
        self.changed = asyncio.Event()

    def __call__(self, payload: str | None) -> None:
        self.items.append(payload)
        self.changed.set()

    async def until(self, check: Callable[[list[str | None]], bool]) -> None:
        async with asyncio.timeout(10):
            while not check(self.items):
                self.changed.clear()
                await self.changed.wait()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_notifications_arrive_and_a_killed_connection_reconnects_and_says_so(
        database_url: str) -> None:
    db = Database(database_url)
    dsn = db.libpq_url
    await db.dispose()
    one, two = Seen(), Seen()
    notes = Notifications(dsn, retry_s=0.1)
    notes.on("one", one)
    notes.on("two", two)
    await notes.start()
    admin = await asyncpg.connect(dsn)
    try:
        await admin.execute("SELECT pg_notify('one', 'run_1 3')")
        await admin.execute("SELECT pg_notify('two', 'x')")
        await one.until(lambda items: items == ["run_1 3"])
        await two.until(lambda items: items == ["x"])

        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1 AND datname = current_database()", APPLICATION_NAME)
        assert killed == 1
        # Back, and every handler told it may have missed something.
        await one.until(lambda items: items[-1:] == [None])
        await two.until(lambda items: items[-1:] == [None])
        async with asyncio.timeout(10):
            await notes.ready.wait()
        await admin.execute("SELECT pg_notify('one', 'run_1 4')")
        await one.until(lambda items: items[-1:] == ["run_1 4"])
        assert two.items == ["x", None]
    finally:
        await admin.close()
        await notes.stop()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_channel_added_once_listening_is_heard_now_and_after_a_reconnect(
        database_url: str) -> None:
    # The queue worker joins the process's one LISTEN connection after it started, many
    # channels at once, while the keep-alive may be using the connection.
    db = Database(database_url)
    dsn = db.libpq_url
    await db.dispose()
    notes = Notifications(dsn, retry_s=0.1)
    notes.on("first", Seen())
    await notes.start()
    late = [Seen() for _ in range(5)]
    admin = await asyncpg.connect(dsn)
    try:
        await asyncio.gather(*(notes.add(f"late_{i}", seen) for i, seen in enumerate(late)),
                             notes.add("late_0", late[0]))  # the same channel twice: once
        await admin.execute("SELECT pg_notify('late_0', 'a'), pg_notify('late_4', 'b')")
        await late[0].until(lambda items: items == ["a", "a"])  # its two handlers
        await late[4].until(lambda items: items == ["b"])
        await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1 AND datname = current_database()", APPLICATION_NAME)
        await late[4].until(lambda items: items[-1:] == [None])
        async with asyncio.timeout(10):
            await notes.ready.wait()
        await admin.execute("SELECT pg_notify('late_4', 'c')")
        await late[4].until(lambda items: items[-1:] == ["c"])
    finally:
        await admin.close()
        await notes.stop()
