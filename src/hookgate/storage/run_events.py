"""The run event log (``run_events``): what SSE clients replay with Last-Event-ID."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from hookgate.engines.events import RunEvent
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.run_writes import RUN_EVENTS_CHANNEL, write_run
from hookgate.storage.tables import RunEventRow

__all__ = ["RUN_EVENTS_CHANNEL", "RunEventLog"]


class RunEventLog:
    """Appends events in batches and reads them back in order."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def append(self, run_id: str, events: Sequence[RunEvent], *,
                     fence: Fence | None = None) -> None:
        """Store events (a seq already stored is kept as it was); with ``fence``, only while
        that executor holds the run. On PostgreSQL the commit notifies the run's followers."""
        await write_run(self.db, run_id, checkpoint=None, events=events, fence=fence)

    async def after(self, run_id: str, seq: int = 0) -> list[RunEvent]:
        async with self.db.session() as s:
            rows = (await s.execute(
                select(RunEventRow).where(RunEventRow.run_id == run_id, RunEventRow.seq > seq)
                .order_by(RunEventRow.seq)
            )).scalars().all()
        return [RunEvent(r.type, dict(r.data or {}), r.seq) for r in rows]
