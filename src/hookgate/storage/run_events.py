"""The run event log (``run_events``): what SSE clients replay with Last-Event-ID."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from hookgate.engines.events import RunEvent
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.tables import RunEventRow
from hookgate.storage.types import utcnow

#: NOTIFY channel whose payload is the id of a run that has new events.
RUN_EVENTS_CHANNEL = "hookgate_run_events"


class RunEventLog:
    """Appends events in batches and reads them back in order."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def append(self, run_id: str, events: Sequence[RunEvent], *,
                     fence: Fence | None = None) -> None:
        """Store events (a seq already stored is kept as it was); with ``fence``, only while
        that executor holds the run. On PostgreSQL the commit notifies the run's followers."""
        if not events:
            return
        insert = sqlite_insert if self.db.is_sqlite else pg_insert
        stmt = insert(RunEventRow).values([
            {"run_id": run_id, "seq": e.seq, "type": e.type, "data": e.data,
             "created_at": utcnow()}
            for e in events
        ]).on_conflict_do_nothing(index_elements=["run_id", "seq"])
        async with self.db.transaction() as s:
            if fence is not None:
                await fence.check(s)
            await s.execute(stmt)
            await self.db.notify(s, RUN_EVENTS_CHANNEL, run_id)

    async def after(self, run_id: str, seq: int = 0) -> list[RunEvent]:
        async with self.db.session() as s:
            rows = (await s.execute(
                select(RunEventRow).where(RunEventRow.run_id == run_id, RunEventRow.seq > seq)
                .order_by(RunEventRow.seq)
            )).scalars().all()
        return [RunEvent(r.type, dict(r.data or {}), r.seq) for r in rows]
