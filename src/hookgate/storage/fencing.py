"""Fencing tokens for runs: an executor that takes a run over raises ``runs.fence`` and gets
the new value; checkpoints, event appends and tool claims are written only in a transaction
that finds that value still current, so an executor presumed dead cannot write afterwards.

Row locks: a takeover locks the run's row FOR UPDATE, which waits for every write in flight;
event appends and tool claims take FOR KEY SHARE and checkpoints FOR NO KEY UPDATE, which
do not wait for each other (a tool claim never queues behind a checkpoint's transaction).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.engines.interrupts import Fenced
from hookgate.storage.database import Database
from hookgate.storage.pg_lane import PgLane
from hookgate.storage.tables import RunRow
from hookgate.storage.types import utcnow

#: The token read on the raw lanes: SQLite's IMMEDIATE transaction already holds the
#: database's write lock; on PostgreSQL the row is locked as in `Fence.check` (keyed by
#: ``updates_run``: a checkpoint's no-key update lock, else a key-share lock).
FENCE_SQLITE = "SELECT fence FROM runs WHERE id = ?"
FENCE_PG = {True: "SELECT fence FROM runs WHERE id = $1 FOR NO KEY UPDATE",
            False: "SELECT fence FROM runs WHERE id = $1 FOR KEY SHARE"}


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


#: The takeover on PostgreSQL in one statement (one round trip on the way from a decision to
#: the tool): the row locked FOR UPDATE in the CTE, which waits for every write in flight
#: under the old token (the UPDATE alone takes the weaker no-key lock, which would not wait
#: for their key-share locks), then the token raised and the state read.
TAKE_OVER_PG = (
    "WITH held AS (SELECT id FROM runs WHERE id = $1 FOR UPDATE) "
    "UPDATE runs SET fence = runs.fence + 1, updated_at = $2 FROM held "
    "WHERE runs.id = held.id RETURNING runs.fence, runs.state_json")


async def take_over_reading(db: Database, run_id: str) -> tuple[Fence, str] | None:
    """Become the run's executor and read its stored state in the same statement; None:
    no run."""
    lane = PgLane.for_database(db)
    if lane is not None:
        found = await lane.fetchrow(TAKE_OVER_PG, run_id, utcnow())
        return (Fence(run_id, int(found[0])), str(found[1])) if found is not None else None
    async with db.transaction() as s:
        # FOR UPDATE first: the UPDATE alone takes the weaker no-key lock, which would not
        # wait for the share locks of writes in flight under the old token.
        await s.execute(select(RunRow.id).where(RunRow.id == run_id).with_for_update())
        row = (await s.execute(
            update(RunRow).where(RunRow.id == run_id).values(fence=RunRow.fence + 1)
            .returning(RunRow.fence, RunRow.state_json)
        )).one_or_none()
    return (Fence(run_id, int(row[0])), str(row[1])) if row is not None else None
