"""A batch of run events whose write fails for a moment (the database away under load) is
written when it is back, not dropped: a run's `done` is never missing from its log."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from hookgate.engines.events import RunEvent
from hookgate.runs.events_bus import EventBus
from hookgate.storage.database import Database
from hookgate.storage.run_events import RunEventLog


async def test_events_written_while_the_log_is_unavailable_arrive_once_it_is_back(
        db: Database) -> None:
    bus = EventBus(RunEventLog(db))
    bus.open("run_1", [])
    async with db.engine.begin() as conn:  # the log's table is away for a moment
        await conn.execute(text("ALTER TABLE run_events RENAME TO run_events_away"))
    bus.publish("run_1", RunEvent("answer", {"answer": "ok"}, 1))
    bus.publish("run_1", RunEvent("done", {"status": "completed"}, 2))
    await asyncio.sleep(0.3)  # the first attempts fail
    async with db.engine.begin() as conn:
        await conn.execute(text("ALTER TABLE run_events_away RENAME TO run_events"))
    await bus.close("run_1")
    logged = await RunEventLog(db).after("run_1")
    assert [(e.seq, e.type) for e in logged] == [(1, "answer"), (2, "done")]
