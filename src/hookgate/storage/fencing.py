"""Fencing tokens for runs: an executor that takes a run over raises ``runs.fence`` and gets
the new value; checkpoints, event appends and tool claims are written only in a transaction
that finds that value still current, so an executor presumed dead cannot write afterwards."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.engines.interrupts import Fenced
from hookgate.storage.database import Database
from hookgate.storage.tables import RunRow

#: The token read on the raw lanes: SQLite's IMMEDIATE transaction already holds the
#: database's write lock; on PostgreSQL the row is locked as in `Fence.check`.
FENCE_SQLITE = "SELECT fence FROM runs WHERE id = ?"
FENCE_PG = {True: "SELECT fence FROM runs WHERE id = $1 FOR UPDATE",
            False: "SELECT fence FROM runs WHERE id = $1 FOR SHARE"}


@dataclass(slots=True, frozen=True)
class Fence:
    """The token of one executor's hold on one (root) run."""

    run_id: str
    token: int

    async def check(self, session: AsyncSession, *, updates_run: bool = False) -> None:
        """Raise Fenced unless the token is current. The row stays locked until the
        transaction ends, so a takeover (an UPDATE of the row) waits for this write.
        ``updates_run``: the transaction will update the row itself (a checkpoint), so
        lock it exclusively now; two share locks upgrading at once would deadlock."""
        current = (await session.execute(
            select(RunRow.fence).where(RunRow.id == self.run_id)
            .with_for_update(read=not updates_run)
        )).scalar_one_or_none()
        self.refuse_unless(current)

    def refuse_unless(self, current: int | None) -> None:
        """Raise Fenced unless ``current`` (the stored token, read under a row lock in the
        writing transaction) is this token."""
        if current != self.token:
            raise Fenced(f"run {self.run_id} was taken over (fence {current}, this executor "
                         f"holds {self.token}); this executor writes nothing more")


async def take_over(db: Database, run_id: str) -> Fence | None:
    """Become the run's executor: raise its fence and return the new token (None: no run)."""
    async with db.transaction() as s:
        token = (await s.execute(
            update(RunRow).where(RunRow.id == run_id).values(fence=RunRow.fence + 1)
            .returning(RunRow.fence)
        )).scalar_one_or_none()
    return Fence(run_id, int(token)) if token is not None else None
