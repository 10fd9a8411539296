"""Live run events for SSE subscribers, and their batched write to the event log.

Each run advancing in this process has a RunFeed: every event it emitted here (for replay
without a query), the queues of local subscribers, and a pending batch for the run_events
table (written under the executor's fence, if it has one). A checkpoint takes the pending
batch into its own transaction (`EventBus.checkpoint`); events no checkpoint takes within
FLUSH_AFTER_S are written alone. Most events come just before a checkpoint (a call's
`tool_call` and its result before the turn's), so a run's events cost no writes of their
own unless a step takes longer than that. Batches are written one at a time,
in seq order, so a follower reading ``seq > last`` never skips one committed late. With
``followers`` (PostgreSQL), subscribers instead follow the event log itself, woken by a
notification per run, so any instance can stream any run to its end wherever it executes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from hookgate.engines.events import RunEvent
from hookgate.engines.interrupts import Fenced
from hookgate.retries import first_then_retrying, pauses, retrying, warn_before_retry
from hookgate.runs.notifications import Follower, Wakers
from hookgate.storage.fencing import Fence
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.runs import RESUMABLE, DatabaseRunStore

log = logging.getLogger(__name__)

#: How often a follower re-reads the log with no notification (a dropped notification
#: connection must not leave a stream hanging).
FOLLOW_RECHECK_S = 10.0
#: How long a new event waits for the run's next checkpoint to take it (in the same
#: transaction) before it is written on its own. A process that dies in between loses at
#: most this much of the run's latest events, as any stop between emit and write did: a
#: resumed run announces again a call whose `tool_call` is missing (see RunDriver.run_call).
FLUSH_AFTER_S = 0.1
#: Pauses between attempts to write a batch of events that failed (then it is given up).
WRITE_RETRY_S = (0.1, 0.5, 2.0, 5.0)


class RunFeed:
    def __init__(self, run_id: str, history: list[RunEvent], fence: Fence | None,
                 org_id: str | None = None) -> None:
        self.run_id = run_id
        #: The run's org: who may read the feed (see `EventBus.live`).
        self.org_id = org_id
        #: The highest seq committed to the log (the history is the log's).
        self.committed = history[-1].seq if history else 0
        self.events: list[RunEvent] = list(history)
        self.subscribers: set[asyncio.Queue[RunEvent | None]] = set()
        self.pending: list[RunEvent] = []
        self.flushing: asyncio.Task[None] | None = None
        #: Starts ``flushing`` FLUSH_AFTER_S after an event, unless a checkpoint came first.
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False
        self.fence = fence
        #: Held while a batch is written (by a flush or a checkpoint).
        self.writing = asyncio.Lock()
        #: Checkpoints waiting for ``writing``: a flush leaves the pending events to them.
        self.checkpoints_waiting = 0
        #: The highest seq this feed has sent to the log: a notification up to it is of this
        #: process's own write, whose events it hands its streams when the write returns.
        self.sent = 0


@dataclass(slots=True, frozen=True)
class LiveRun:
    """What `EventBus.live` knows of a run advancing here."""

    org_id: str | None
    logged: list[RunEvent]


class EventBus:
    """Fans a run's events out to subscribers and writes them to the log in batches."""

    def __init__(self, log_: RunEventLog, *, followers: Wakers | None = None) -> None:
        self.log = log_
        self.feeds: dict[str, RunFeed] = {}
        #: Given on PostgreSQL: subscriptions follow the log (see the module docstring).
        self.followers: Wakers | None = followers
        #: Runs whose advance this process has taken and not yet ended (their feed may not
        #: be open yet): a stream here takes their events from this process.
        self._taken: Counter[str] = Counter()

    def taken(self, run_id: str) -> None:
        """The run's advance was taken by this process (`released` when it ends)."""
        self._taken[run_id] += 1

    def released(self, run_id: str) -> None:
        left = self._taken[run_id] - 1
        if left > 0:
            self._taken[run_id] = left
        else:
            del self._taken[run_id]

    def advancing_here(self, run_id: str) -> bool:
        return run_id in self.feeds or run_id in self._taken

    def open(self, run_id: str, history: list[RunEvent], fence: Fence | None = None,
             org_id: str | None = None) -> RunFeed:
        feed = RunFeed(run_id, history, fence, org_id)
        self.feeds[run_id] = feed
        return feed

    def publish(self, run_id: str, event: RunEvent, feed: RunFeed | None = None) -> None:
        """``event`` to the run's feed, or to ``feed``: the one its executor opened (a job
        superseded by a takeover in this same process keeps writing to its own feed, where
        its fence refuses the writes, never into its successor's)."""
        feed = feed or self.feeds.get(run_id)
        if feed is None:
            return
        feed.events.append(event)
        feed.pending.append(event)
        for q in feed.subscribers:
            q.put_nowait(event)
        self._arm(feed)

    def _arm(self, feed: RunFeed) -> None:
        """Write the pending events FLUSH_AFTER_S from now unless a checkpoint takes them
        (a flush in progress writes them next, without waiting)."""
        if feed.timer is None and (feed.flushing is None or feed.flushing.done()):
            feed.timer = asyncio.get_running_loop().call_later(
                FLUSH_AFTER_S, self._start_flush, feed)

    def _start_flush(self, feed: RunFeed) -> None:
        feed.timer = None
        if feed.pending and (feed.flushing is None or feed.flushing.done()):
            feed.flushing = asyncio.create_task(self._flush(feed))

    @staticmethod
    def _stop_timer(feed: RunFeed) -> None:
        if feed.timer is not None:
            feed.timer.cancel()
            feed.timer = None

    async def _flush(self, feed: RunFeed) -> None:
        while feed.pending:
            async with feed.writing:
                if feed.checkpoints_waiting:
                    # A checkpoint is next: it writes these with the state they led to (a
                    # `done` must not be read before the status it announces).
                    return
                batch, feed.pending = feed.pending, []
                if not batch:  # a checkpoint took them while this waited
                    return
                if not await self._write(feed, batch):
                    # The log is the only place a run's trace is stored: the batch waits
                    # for the run's next checkpoint (or the next flush), in order.
                    feed.pending[:0] = batch
                    return

    async def _write(self, feed: RunFeed, batch: list[RunEvent]) -> bool:
        """Write ``batch``; False if every attempt failed. A database hiccup under load
        must not lose a batch (its `done` would be missing from the log while the
        checkpoint says the run ended): retry, then give up loudly."""
        async def write() -> None:
            await self._send(feed, batch, self.log.append(feed.run_id, batch, fence=feed.fence))

        def attempts() -> AsyncRetrying:
            return retrying(
                wait=pauses(lambda: WRITE_RETRY_S),
                stop=stop_after_attempt(len(WRITE_RETRY_S) + 1),
                retry=retry_if_exception(lambda exc: not isinstance(exc, Fenced)),
                before_sleep=warn_before_retry(
                    log, lambda _: f"writing {len(batch)} events of run {feed.run_id}",
                    exc_info=True))
        try:
            await first_then_retrying(attempts, write)
        except Fenced:
            log.warning("run %s was taken over; %d event(s) of this executor dropped",
                        feed.run_id, len(batch))
            return True
        except Exception:
            log.exception("writing %d events of run %s failed; they stay pending "
                          "for the run's next checkpoint", len(batch), feed.run_id)
            return False
        self._committed(feed, batch)
        return True

    async def checkpoint(self, run_id: str,
                         save: Callable[[Sequence[RunEvent]], Awaitable[None]], *,
                         fence: Fence | None = None) -> None:
        """``save(events)`` with the run's events not yet written, so the checkpoint and
        the events it follows commit in one transaction. If it fails they stay pending.
        With ``fence``, only the feed of that executor: a superseded one takes none of its
        successor's events (its save is refused by its fence anyway)."""
        feed = self.feeds.get(run_id)
        if feed is not None and fence is not None and feed.fence != fence:
            feed = None
        if feed is None:
            await save(())
            return
        feed.checkpoints_waiting += 1
        try:
            await feed.writing.acquire()
        finally:
            feed.checkpoints_waiting -= 1
        try:
            batch, feed.pending = feed.pending, []
            self._stop_timer(feed)  # taken: nothing is left to write alone
            try:
                await self._send(feed, batch, save(batch))
            except BaseException:
                feed.pending[:0] = batch
                if not feed.closed:
                    # Not lost with the checkpoint: written alone unless the next one
                    # takes them (the flush retries a database away for a moment).
                    self._arm(feed)
                raise
            self._committed(feed, batch)
        finally:
            feed.writing.release()

    async def _send(self, feed: RunFeed, batch: Sequence[RunEvent],
                    write: Awaitable[None]) -> None:
        """Await ``write`` of ``batch``, its seqs counted as this process's own while it
        is in flight or done; a write that fails (or is refused) counts for nothing, and
        the run's streams here read the log instead of waiting for events in hand."""
        before = feed.sent
        if batch:
            feed.sent = max(before, batch[-1].seq)
        try:
            await write
        except BaseException:
            feed.sent = before
            if batch and self.followers is not None:
                self.followers.wake(feed.run_id)
            raise

    def _committed(self, feed: RunFeed, batch: Sequence[RunEvent]) -> None:
        # This process's streams of the run take the batch as it is: no read of the log.
        if batch:
            feed.committed = max(feed.committed, batch[-1].seq)
            if self.followers is not None:
                self.followers.hand(feed.run_id, batch)

    def live(self, run_id: str, after: int) -> LiveRun | None:
        """A run advancing in this process, as the log holds it now: its org and its
        committed events with seq > ``after`` (None: not advancing here). A stream's first
        read, without a query; what is committed next is handed to the stream."""
        feed = self.feeds.get(run_id)
        if feed is None or feed.closed:
            return None
        upto = feed.committed
        return LiveRun(feed.org_id, [e for e in feed.events if after < e.seq <= upto])

    async def close(self, run_id: str, feed: RunFeed | None = None) -> None:
        """The run stopped advancing in this process (or ``feed``'s executor stopped): flush,
        end subscriptions, drop it — never a successor's feed."""
        feed = feed or self.feeds.get(run_id)
        if feed is None:
            return
        feed.closed = True
        self._stop_timer(feed)  # what is pending is written now, below
        if feed.flushing is not None:
            with contextlib.suppress(Exception):
                await feed.flushing
        await self._flush(feed)
        for q in feed.subscribers:
            q.put_nowait(None)
        if self.feeds.get(run_id) is feed:
            self.feeds.pop(run_id, None)

    def follow(self, run_id: str) -> Follower | None:
        """Register for the run's wake-ups ahead of a read the caller makes itself (None:
        streams here do not follow the log); hand it to `subscribe` with what was read."""
        return self.followers.add(run_id) if self.followers is not None else None

    def unfollow(self, run_id: str, follower: Follower | None) -> None:
        """Drop a registration `follow` made (twice is harmless)."""
        if self.followers is not None and follower is not None:
            self.followers.remove(run_id, follower)

    async def subscribe(self, run_id: str, after: int = 0, *,
                        status_before: str | None = None,
                        follower: Follower | None = None,
                        logged: list[RunEvent] | None = None) -> AsyncIterator[RunEvent]:
        """Events with seq > ``after``: the replay, then live ones until the run ends.

        ``status_before``: the run's status as the caller read it just before (the API's
        visibility check), which spares the stream its own read of it: a run that had ended
        by then has every event in the log the stream reads first. ``follower``, from
        `follow` before that read, and ``logged``, the events with seq > ``after`` the same
        read found: the stream's first read of the log is that one."""
        if self.followers is not None:
            # Closed with this stream, not whenever the collector gets to it: its finally
            # drops the stream's registration for wake-ups.
            async with contextlib.aclosing(self._follow(
                    self.followers, run_id, after, status_before, follower, logged)) as events:
                async for event in events:
                    yield event
            return
        feed = self.feeds.get(run_id)
        if feed is None:
            for event in logged if logged is not None else await self.log.after(run_id, after):
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

    async def _follow(self, followers: Wakers, run_id: str, after: int,
                      status_before: str | None = None, me: Follower | None = None,
                      first: list[RunEvent] | None = None
                      ) -> AsyncGenerator[RunEvent, None]:
        # Registered before the first read, so no notification between read and wait is lost.
        if me is None:
            me = followers.add(run_id)
            first = None
        try:
            # The first advance of a run, where the process that started it took it, wakes
            # nobody else until a stream elsewhere marks the run followed (every later
            # advance is a takeover, which marks it): mark it, then read past the caller's
            # read, which came before the mark.
            marked = (not self.advancing_here(run_id)
                      and (status_before is None or status_before in RESUMABLE)
                      and not (first and first[-1].type == "done"))
            if marked:
                await DatabaseRunStore(self.log.db).mark_followed(run_id)
            last = after
            unprompted = True  # the first read, or a re-check no wake-up led to
            read = first is None or marked
            if first is not None:
                # The caller's read, made after `me` was registered, is the first read:
                # what came since (handed, or announced past it) is taken up below.
                for event in first:
                    last = event.seq
                    yield event
                    if event.type == "done":
                        return
                if not first and await self._ended_silently(run_id, status_before):
                    return
                status_before = None
            while True:
                me.event.clear()
                handed, me.handed = me.handed, []
                for event in handed:  # committed by this process, in seq order
                    if event.seq == last + 1:
                        last = event.seq
                        yield event
                        if event.type == "done":
                            return
                    elif event.seq > last:
                        read = True  # a gap: the log has what came between
                        break
                # A notification of events past the ones in hand (another instance's, or
                # one that said not how far) sends the stream to the log; one of this
                # process's own write does not: the write hands its events when it returns
                # (its notification can come first).
                read = read or me.read_anyway or (me.upto > last
                                                  and not self._own_write(run_id, me.upto))
                me.read_anyway = False
                if read:
                    events = await self.log.after(run_id, last)
                    for event in events:
                        last = event.seq
                        yield event
                        if event.type == "done":
                            return
                    # Only after reading the log: a run that ended since the last read has
                    # its remaining events (its `done` included) there.
                    if unprompted and not events and await self._ended_silently(
                            run_id, status_before):
                        return  # a client resuming after the end has nothing to wait for
                    status_before = None  # only the first read follows the caller's
                # asyncio.timeout, not wait_for: no task per wait (a stream waits a few
                # times per run, and a task is most of what waiting costs here).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FOLLOW_RECHECK_S):
                        await me.event.wait()
                unprompted = not me.event.is_set()
                read = unprompted  # the periodic re-check reads; a wake-up is judged above
        finally:
            followers.remove(run_id, me)

    def _own_write(self, run_id: str, upto: int) -> bool:
        feed = self.feeds.get(run_id)
        return feed is not None and feed.sent >= upto

    async def _ended_silently(self, run_id: str, status_before: str | None = None) -> bool:
        # A run ended without a `done` event (it could not resume): the stream ends too.
        # A status read before the log was (the caller's) decides as well as one read after
        # it: an end it saw is final. One that came between is seen by the next re-check.
        if status_before is not None:
            return status_before not in RESUMABLE
        row = await DatabaseRunStore(self.log.db).summary(run_id)
        return row is None or row.status not in RESUMABLE
