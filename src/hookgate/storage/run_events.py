"""The run event log (``run_events``): what SSE clients replay with Last-Event-ID."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from hookgate.engines.events import RunEvent
from hookgate.engines.outcome import stops_a_call
from hookgate.storage.backends.postgresql import aggregated_events
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.run_writes import RUN_EVENTS_CHANNEL, write_run
from hookgate.storage.tables import RunEventRow

__all__ = ["RUN_EVENTS_CHANNEL", "RunEventLog", "aggregated_events"]


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
        """The run's events with seq > ``seq``, in order: one statement on the backend's
        fast path (SSE followers read this on every notification)."""
        return await self.db.backend.events_after(run_id, seq)

    async def runs_with_stopped_calls(self, run_ids: Sequence[str]) -> set[str]:
        """Which of these runs had a call a hook blocked or whose output it withheld."""
        if not run_ids:
            return set()
        async with self.db.session() as s:
            rows = (await s.execute(
                select(RunEventRow.run_id, RunEventRow.type, RunEventRow.data)
                .where(RunEventRow.run_id.in_(list(run_ids)),
                       RunEventRow.type.in_(("tool_result", "tool_blocked")))
            )).all()
        return {str(run_id) for run_id, type_, data in rows
                if stops_a_call(str(type_), dict(data or {}))}
