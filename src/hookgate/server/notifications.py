"""PostgreSQL notifications for this process: one LISTEN connection, handlers per channel.

Streams of runs executing elsewhere and inbox changes made by other instances arrive here.
After the connection drops it reconnects and calls every handler with None ("you may have
missed something: read again").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import psycopg
from psycopg import sql

log = logging.getLogger(__name__)

Handler = Callable[[str | None], None]


class Notifications:
    """LISTENs on the channels that have handlers and dispatches payloads to them."""

    def __init__(self, conninfo: str, *, retry_s: float = 1.0) -> None:
        self.conninfo = conninfo
        self.retry_s = retry_s
        self._handlers: dict[str, list[Handler]] = {}
        self._task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    def on(self, channel: str, handler: Handler) -> None:
        """Call ``handler(payload)`` for every notification on ``channel`` (register all
        channels before ``start``)."""
        self._handlers.setdefault(channel, []).append(handler)

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="hookgate-notifications")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready.wait(), 10)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _listen(self) -> None:
        first = True
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                        self.conninfo, autocommit=True) as conn:
                    for channel in self._handlers:
                        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                    self.ready.set()
                    if not first:
                        self._dispatch_all(None)
                    first = False
                    async for note in conn.notifies():
                        self._dispatch(note.channel, note.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("the notification connection failed (%s); reconnecting in %ss",
                            exc, self.retry_s)
            self.ready.clear()
            await asyncio.sleep(self.retry_s)

    def _dispatch(self, channel: str, payload: str | None) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(payload)
            except Exception:
                log.exception("a notification handler of %s failed", channel)

    def _dispatch_all(self, payload: str | None) -> None:
        for channel in self._handlers:
            self._dispatch(channel, payload)


class Wakers:
    """asyncio.Events of local followers by key (run id, org id): set on a notification."""

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}

    def add(self, key: str) -> asyncio.Event:
        event = asyncio.Event()
        self._events.setdefault(key, set()).add(event)
        return event

    def remove(self, key: str, event: asyncio.Event) -> None:
        events = self._events.get(key)
        if events is not None:
            events.discard(event)
            if not events:
                del self._events[key]

    def wake(self, key: str | None) -> None:
        """Wake the followers of ``key``; None wakes everyone (after a reconnect)."""
        targets = (self._events.get(key, set()) if key is not None
                   else set().union(*self._events.values()) if self._events else set())
        for event in targets:
            event.set()

    def __contains__(self, key: str) -> bool:
        return key in self._events
