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
