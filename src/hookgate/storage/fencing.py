"""Fencing tokens for runs: an executor that takes a run over raises ``runs.fence`` and gets
the new value; checkpoints, event appends and tool claims are written only in a transaction
that finds that value still current, so an executor presumed dead cannot write afterwards.

Row locks: a takeover locks the run's row FOR UPDATE, which waits for every write in flight;
event appends and tool claims take FOR KEY SHARE and checkpoints FOR NO KEY UPDATE, which
do not wait for each other (a tool claim never queues behind a checkpoint's transaction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.engines.interrupts import Fenced
from hookgate.storage.tables import RunRow

if TYPE_CHECKING:
    from hookgate.storage.database import Database


@dataclass(slots=True, frozen=True)
class Fence:
    """The token of one executor's hold on one (root) run."""

    run_id: str
    token: int

    async def check(self, session: AsyncSession, *, updates_run: bool = False) -> None:
        """Raise Fenced unless the token is current. The row stays locked until the
        transaction ends, so a takeover (FOR UPDATE) waits for this write. ``updates_run``:
        the transaction will update the row itself (a checkpoint), so take the updater's
        lock now (FOR NO KEY UPDATE); two share locks upgrading at once would deadlock."""
        current = (await session.execute(
            select(RunRow.fence).where(RunRow.id == self.run_id)
            .with_for_update(read=not updates_run, key_share=True)
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
    taken = await take_over_reading(db, run_id)
    return taken[0] if taken is not None else None


async def take_over_reading(db: Database, run_id: str) -> tuple[Fence, str] | None:
    """Become the run's executor and read its stored state in the same transaction (on
    PostgreSQL the same statement); None: no run."""
    return await db.backend.take_over(run_id)
