"""The run event log (``run_events``): what SSE clients replay with Last-Event-ID."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select

from hookgate.engines.events import RunEvent, event_of
from hookgate.engines.outcome import stops_a_call
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.pg_lane import PgLane
from hookgate.storage.run_writes import RUN_EVENTS_CHANNEL, write_run
from hookgate.storage.sqlite_lane import SqliteLane
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
        """The run's events with seq > ``seq``, in order: one statement, on the raw lane
        when there is one (SSE followers read this on every notification)."""
        lane = SqliteLane.for_database(self.db)
        if lane is not None:
            rows = await lane.read(lambda c: c.execute(_AFTER_SQLITE, (run_id, seq)).fetchall())
            return [_event(row) for row in rows]
        pg = PgLane.for_database(self.db)
        if pg is not None:
            return [_event(row) for row in await pg.fetch(_AFTER_PG, run_id, seq)]
        async with self.db.session() as s:
            found = (await s.execute(
                select(RunEventRow).where(RunEventRow.run_id == run_id, RunEventRow.seq > seq)
                .order_by(RunEventRow.seq)
            )).scalars().all()
        return [event_of(r.type, dict(r.data or {}), r.seq) for r in found]

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


_AFTER_SQLITE = "SELECT type, data, seq FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq"
_AFTER_PG = "SELECT type, data, seq FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq"


def _event(row: Any) -> RunEvent:
    # SQLite (and asyncpg) hand the JSON column over as text; psycopg has parsed it.
    data = json.loads(row[1]) if isinstance(row[1], str | bytes) else row[1]
    return event_of(str(row[0]), dict(data or {}), int(row[2]))


def aggregated_events(value: str | list[Any] | None) -> list[RunEvent]:
    """Events a statement gathered with ``json_agg(json_build_array(type, data, seq))``
    (NULL: none); asyncpg hands the JSON over as text, psycopg has parsed it."""
    if value is None:
        return []
    items = json.loads(value) if isinstance(value, str | bytes) else value
    return [event_of(str(kind), dict(data or {}), int(seq)) for kind, data, seq in items]
