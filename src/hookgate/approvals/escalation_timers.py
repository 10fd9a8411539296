"""The follow-up scheduler of a single process (SQLite): one task sleeps until the earliest
follow-up due, runs it and sleeps again; nothing polls. After a start the pending requests
are scheduled again from the database, so follow-ups survive restarts."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
from datetime import datetime

from hookgate.approvals.escalation import Escalations
from hookgate.background import BackgroundTask
from hookgate.storage.types import utcnow

log = logging.getLogger(__name__)


class EscalationTimers:
    """Calls `Escalations.run_due` for each request when its next follow-up is due."""

    def __init__(self, escalations: Escalations) -> None:
        self.escalations = escalations
        self._due: list[tuple[datetime, str]] = []
        self._changed = asyncio.Event()
        self._task = BackgroundTask("hookgate-escalations")

    async def schedule(self, request_id: str, at: datetime) -> None:
        heapq.heappush(self._due, (at, request_id))
        self._changed.set()

    async def start(self) -> None:
        self._task.start(self._loop)
        await self.escalations.reschedule_all()

    async def stop(self) -> None:
        await self._task.stop()

    async def _loop(self) -> None:
        while True:
            self._changed.clear()  # before looking: a schedule() from now on wakes us
            now = utcnow()
            while self._due and self._due[0][0] <= now:
                _, request_id = heapq.heappop(self._due)
                try:
                    again = await self.escalations.run_due(request_id)
                except Exception:
                    log.exception("the follow-up of request %s failed", request_id)
                    continue
                if again is not None:
                    heapq.heappush(self._due, (again, request_id))
                now = utcnow()
            wait = (self._due[0][0] - now).total_seconds() if self._due else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait)
