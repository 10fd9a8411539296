"""The at-most-once execution ledger in the ``tool_executions`` table."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.tables import ToolExecutionRow
from hookgate.storage.types import utcnow
from hookgate.tools.ledger import PriorExecution


class DatabaseLedger:
    """Claims a (run, tool call) with an INSERT; a second claim hits the primary key."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim(
        self, run_id: str, tool_call_id: str, tool_name: str, args_sha256: str,
        *, fence: Fence | None = None,
    ) -> PriorExecution | None:
        try:
            async with self.db.transaction() as s:
                if fence is not None:  # a fenced-out executor claims nothing
                    await fence.check(s)
                s.add(ToolExecutionRow(run_id=run_id, tool_call_id=tool_call_id,
                                       tool_name=tool_name, args_sha256=args_sha256))
        except IntegrityError:
            async with self.db.session() as s:
                row = await s.get(ToolExecutionRow, (run_id, tool_call_id))
            if row is None:
                raise
            return PriorExecution(row.observation, row.ok, row.tool_name, row.args_sha256)
        return None

    def fenced(self, fence: Fence) -> FencedLedger:
        """This ledger as the executor holding ``fence`` may use it."""
        return FencedLedger(self, fence)

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool) -> None:
        async with self.db.transaction() as s:
            await s.execute(
                update(ToolExecutionRow)
                .where(ToolExecutionRow.run_id == run_id,
                       ToolExecutionRow.tool_call_id == tool_call_id)
                .values(observation=observation, ok=ok, finished_at=utcnow())
            )


class FencedLedger:
    """The ledger as one executor of a run sees it: its claims hold only while its fence
    is current. Finishing a claim is not fenced: the tool did run, and its result is true."""

    def __init__(self, ledger: DatabaseLedger, fence: Fence) -> None:
        self.ledger = ledger
        self.fence = fence

    async def claim(
        self, run_id: str, tool_call_id: str, tool_name: str, args_sha256: str
    ) -> PriorExecution | None:
        return await self.ledger.claim(run_id, tool_call_id, tool_name, args_sha256,
                                       fence=self.fence)

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool) -> None:
        await self.ledger.finish(run_id, tool_call_id, observation, ok)
