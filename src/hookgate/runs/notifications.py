"""Wake-ups between instances: one subscription per process, handlers per channel.

Streams of runs executing elsewhere and inbox changes made by other instances arrive here,
through PostgreSQL LISTEN (``Notifications``) or, with ``redis_url``, Redis pub/sub
(runs/redis_wakeups.py). Either way, after the subscription drops it reconnects and calls
every handler with None ("you may have missed something: read again"). The payloads only
wake readers up; what they read comes from the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from tenacity import retry_if_exception_type, retry_if_result, wait_fixed

from hookgate.background import BackgroundTask
from hookgate.retries import RetryCallState, retrying

log = logging.getLogger(__name__)

Handler = Callable[[str | None], None]
#: At most one warning per this many seconds about a failing subscription or publication
#: (a server away for an hour must not write a line per retry or per event).
WARN_EVERY_S = 30.0
#: How often the LISTEN connection is checked when no notification comes.
KEEPALIVE_S = 30.0
#: The LISTEN connection's name in pg_stat_activity.
APPLICATION_NAME = "hookgate-wakeups"


class Subscription:
    """Handlers per channel and the task that feeds them; subclasses implement _listen."""

    def __init__(self, *, retry_s: float = 1.0) -> None:
        self.retry_s = retry_s
        self._handlers: dict[str, list[Handler]] = {}
        self._task = BackgroundTask("hookgate-wakeups")
        self.ready = asyncio.Event()
        self._warned_at = float("-inf")

    def on(self, channel: str, handler: Handler) -> None:
        """Call ``handler(payload)`` for every notification on ``channel`` (register all
        channels before ``start``)."""
        self._handlers.setdefault(channel, []).append(handler)

    async def start(self) -> None:
        if self._task.start(self._run):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready.wait(), 10)

    async def stop(self) -> None:
        await self._task.stop()

    async def _run(self) -> None:
        first = True

        async def subscribe() -> None:
            nonlocal first
            async for _ in self._listen():  # yields once, when subscribed
                self.ready.set()
                if not first:
                    self._dispatch_all(None)
                first = False

        def warn(state: RetryCallState) -> None:
            self.ready.clear()
            error = state.outcome.exception() if state.outcome is not None else None
            now = time.monotonic()
            if error is not None and now - self._warned_at >= WARN_EVERY_S:  # not per retry
                self._warned_at = now
                log.warning("the %s wake-up subscription failed (%s); retrying every "
                            "%ss", self.kind, error, self.retry_s)

        # Subscribed again after it failed or its connection ended, for as long as it runs.
        await retrying(wait=wait_fixed(self.retry_s), before_sleep=warn,
                       retry=retry_if_exception_type(Exception) | retry_if_result(
                           lambda _: True))(subscribe)

    #: What carries the wake-ups, for log lines.
    kind = "?"

    def _listen(self) -> AsyncIterator[None]:
        """Subscribe, yield once subscribed, then dispatch until the connection ends."""
        raise NotImplementedError

    def _dispatch(self, channel: str, payload: str | None) -> None:
        for handler in self._handlers.get(channel, ()):
            try:
                handler(payload)
            except Exception:
                log.exception("a wake-up handler of %s failed", channel)

    def _dispatch_all(self, payload: str | None) -> None:
        for channel in self._handlers:
            self._dispatch(channel, payload)


class Notifications(Subscription):
    """LISTENs on the channels that have handlers and dispatches payloads to them."""

    kind = "PostgreSQL"

    def __init__(self, conninfo: str, *, retry_s: float = 1.0) -> None:
        super().__init__(retry_s=retry_s)
        self.conninfo = conninfo
        self._conn: Any = None
        #: One operation at a time on the connection (asyncpg refuses a second one): the
        #: LISTENs, a channel added later, the keep-alive.
        self._using = asyncio.Lock()

    async def add(self, channel: str, handler: Handler) -> None:
        """`on`, once started too: the channel is listened to on the live connection at
        once, and on every connection after it. One LISTEN connection per process, however
        many listen: each notification costs a transaction in every listening backend."""
        new = channel not in self._handlers
        self.on(channel, handler)
        if not new:
            return
        async with self._using:
            conn = self._conn
            if conn is None or conn.is_closed():
                return  # the next connection listens to it
            try:
                await conn.add_listener(channel, self._on_note)
            except Exception as exc:  # the link broke: the next connection listens to it
                log.warning("could not LISTEN on %s yet (%s); the next connection will",
                            channel, exc)

    def discard(self, channel: str, handler: Handler) -> None:
        """Stop calling ``handler`` for ``channel`` (the channel stays listened to)."""
        handlers = self._handlers.get(channel, [])
        if handler in handlers:
            handlers.remove(handler)

    async def _listen(self) -> AsyncIterator[None]:
        # asyncpg: a notification is handed to the callback by its compiled protocol, where
        # psycopg's async notifies() loop cost ~3 % of the server's CPU per run.
        import asyncpg  # type: ignore[import-untyped]  # PostgreSQL only

        conn = await asyncpg.connect(self.conninfo, server_settings={
            "application_name": APPLICATION_NAME})
        try:
            ended = asyncio.Event()
            conn.add_termination_listener(lambda _conn: ended.set())
            # Under the lock, so a channel `add`ed meanwhile is listened to once, by one of
            # the two.
            async with self._using:
                self._conn = conn
                for channel in list(self._handlers):
                    await conn.add_listener(channel, self._on_note)
            yield None
            while not ended.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ended.wait(), KEEPALIVE_S)
                if not ended.is_set():
                    async with self._using:  # a dead link fails here, not never
                        await conn.execute("SELECT 1")
            raise ConnectionError("the LISTEN connection closed")
        finally:
            self._conn = None
            conn.terminate()

    def _on_note(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        self._dispatch(channel, payload)


class Follower:
    """One local stream following a run's event log: woken by a notification (which says
    up to which seq the log was written, when it knows) or handed the events this process
    just committed, so a stream of a run executing here reads nothing."""

    __slots__ = ("event", "handed", "read_anyway", "upto")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        #: Events committed by this process since the follower last looked (seq order).
        self.handed: list[Any] = []
        #: The highest seq a notification announced as written.
        self.upto = 0
        #: A wake-up that did not say how far (a reconnect, an older instance's payload).
        self.read_anyway = False


class Wakers:
    """The local followers of each run, woken by its notifications (``RUN_ID SEQ``: the
    log holds the run's events up to SEQ) and handed this process's committed events."""

    def __init__(self) -> None:
        self._followers: dict[str, set[Follower]] = {}

    def add(self, key: str) -> Follower:
        follower = Follower()
        self._followers.setdefault(key, set()).add(follower)
        return follower

    def remove(self, key: str, follower: Follower) -> None:
        followers = self._followers.get(key)
        if followers is not None:
            followers.discard(follower)
            if not followers:
                del self._followers[key]

    def wake(self, payload: str | None) -> None:
        """A notification: ``RUN_ID SEQ`` (or ``RUN_ID``); None wakes everyone (after a
        reconnect, when notifications may have been missed)."""
        if payload is None:
            for followers in self._followers.values():
                for f in followers:
                    f.read_anyway = True
                    f.event.set()
            return
        key, _, seq = payload.partition(" ")
        upto = int(seq) if seq.isdigit() else None
        for f in self._followers.get(key, ()):
            if upto is None:
                f.read_anyway = True
            else:
                f.upto = max(f.upto, upto)
            f.event.set()

    def hand(self, key: str, events: Sequence[Any]) -> None:
        """Events of ``key`` this process has just committed to the log."""
        for f in self._followers.get(key, ()):
            f.handed.extend(events)
            f.event.set()

    def __contains__(self, key: str) -> bool:
        return key in self._followers
