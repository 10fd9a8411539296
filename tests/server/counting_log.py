"""The real run event log, counting what tests want to see of it: its reads, and each batch
appended on its own (a checkpoint writes its events through the store, not `append`)."""

from __future__ import annotations

from collections.abc import Sequence

from hookgate.engines.events import RunEvent
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.run_events import RunEventLog


class CountingLog(RunEventLog):
    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self.reads = 0
        #: The seqs of each batch appended on its own, in order.
        self.alone: list[list[int]] = []

    async def after(self, run_id: str, seq: int = 0) -> list[RunEvent]:
        self.reads += 1
        return await super().after(run_id, seq)

    async def append(self, run_id: str, events: Sequence[RunEvent], *,
                     fence: Fence | None = None) -> None:
        self.alone.append([e.seq for e in events])
        await super().append(run_id, events, fence=fence)
