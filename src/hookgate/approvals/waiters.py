"""Waiting without polling: a waiter is a future; a decision in this process resolves it at
once, and one low-rate sweep per process notices decisions written by other processes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hookgate.storage.types import utcnow

if TYPE_CHECKING:
    from hookgate.approvals.records import ConfirmationRequest

log = logging.getLogger(__name__)

DecidedSince = Callable[[datetime], Awaitable[list[tuple[str, datetime]]]]


class WaiterHub:
    """Futures keyed by request id. ``wake(id, request)`` resolves every waiter of that
    request; a waiter woken with the decided request needs no query to learn the outcome
    (the cross-process sweep wakes with None, and the waiter reads the row)."""

    def __init__(self) -> None:
        self._waiters: dict[str, list[asyncio.Future[ConfirmationRequest | None]]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def waiter(self, request_id: str) -> asyncio.Future[ConfirmationRequest | None]:
        fut: asyncio.Future[ConfirmationRequest | None] = (
            asyncio.get_running_loop().create_future())
        self._waiters.setdefault(request_id, []).append(fut)
        return fut

    def discard(self, request_id: str,
                fut: asyncio.Future[ConfirmationRequest | None]) -> None:
        futs = self._waiters.get(request_id)
        if not futs:
            return
        with contextlib.suppress(ValueError):
            futs.remove(fut)
        if not futs:
            del self._waiters[request_id]

    def wake(self, request_id: str, request: ConfirmationRequest | None = None) -> int:
        futs = self._waiters.pop(request_id, [])
        for fut in futs:
            if not fut.done():
                fut.set_result(request)
        return len(futs)

    @property
    def waiting(self) -> int:
        return sum(len(v) for v in self._waiters.values())

    def start_sweep(self, decided_since: DecidedSince, interval: float = 2.0) -> None:
        """Start the one background sweep of this process (idempotent)."""
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(decided_since, interval),
                                                name="hookgate-approval-sweep")

    async def stop_sweep(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    async def _sweep(self, decided_since: DecidedSince, interval: float) -> None:
        # Decisions are looked up by time, not per waiter, so the cost is one query per
        # interval however many requests wait. The overlap covers clock skew between
        # processes and commits that land just after a sweep's read.
        since = utcnow() - timedelta(seconds=interval * 2)
        while True:
            await asyncio.sleep(interval)
            if not self._waiters:
                since = utcnow() - timedelta(seconds=interval * 2)
                continue
            started = utcnow()
            try:
                for request_id, _ in await decided_since(since):
                    self.wake(request_id)
            except Exception:  # the sweep must survive a database hiccup
                log.exception("approval sweep failed; retrying in %ss", interval)
                continue
            since = started - timedelta(seconds=interval * 2)
