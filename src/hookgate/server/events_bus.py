"""Live run events for SSE subscribers, and their batched write to the event log.

Each live run has a RunFeed: every event it emitted in this process (for replay without a
query), the queues of its subscribers, and a pending batch for the run_events table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from hookgate.engines.events import RunEvent
from hookgate.storage.run_events import RunEventLog

log = logging.getLogger(__name__)


class RunFeed:
    def __init__(self, run_id: str, history: list[RunEvent]) -> None:
        self.run_id = run_id
        self.events: list[RunEvent] = list(history)
        self.subscribers: set[asyncio.Queue[RunEvent | None]] = set()
        self.pending: list[RunEvent] = []
        self.flushing: asyncio.Task[None] | None = None
        self.closed = False


class EventBus:
    """Fans a run's events out to subscribers and writes them to the log in batches."""

    def __init__(self, log_: RunEventLog) -> None:
        self.log = log_
        self.feeds: dict[str, RunFeed] = {}

    def open(self, run_id: str, history: list[RunEvent]) -> RunFeed:
        feed = RunFeed(run_id, history)
        self.feeds[run_id] = feed
        return feed

    def publish(self, run_id: str, event: RunEvent) -> None:
        feed = self.feeds.get(run_id)
        if feed is None:
            return
        feed.events.append(event)
        feed.pending.append(event)
        for q in feed.subscribers:
            q.put_nowait(event)
        if feed.flushing is None or feed.flushing.done():
            feed.flushing = asyncio.create_task(self._flush(feed))

    async def _flush(self, feed: RunFeed) -> None:
        while feed.pending:
            batch, feed.pending = feed.pending, []
            try:
                await self.log.append(feed.run_id, batch)
            except Exception:
                log.exception("writing %d events of run %s failed", len(batch), feed.run_id)

    async def close(self, run_id: str) -> None:
        """The run ended in this process: flush, end subscriptions, drop the feed."""
        feed = self.feeds.get(run_id)
        if feed is None:
            return
        feed.closed = True
        if feed.flushing is not None:
            with contextlib.suppress(Exception):
                await feed.flushing
        await self._flush(feed)
        for q in feed.subscribers:
            q.put_nowait(None)
        self.feeds.pop(run_id, None)

    async def subscribe(self, run_id: str, after: int = 0) -> AsyncIterator[RunEvent]:
        """Events with seq > ``after``: the replay, then live ones until the run ends."""
        feed = self.feeds.get(run_id)
        if feed is None:
            for event in await self.log.after(run_id, after):
                yield event
            return
        queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        feed.subscribers.add(queue)
        try:
            last = after
            for event in list(feed.events):
                if event.seq > last:
                    last = event.seq
                    yield event
            while True:
                item = await queue.get()
                if item is None:
                    return
                if item.seq > last:
                    last = item.seq
                    yield item
        finally:
            feed.subscribers.discard(queue)
