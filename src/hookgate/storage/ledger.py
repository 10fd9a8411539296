"""The at-most-once execution ledger in the ``tool_executions`` table.

A claim and a finish are each one write on the database backend's fast path (SQLite's
group commit, PostgreSQL's prepared statements in autocommit; storage/backends/); finishes
known together are one write on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hookgate.storage.backends.base import PriorRow
from hookgate.storage.fencing import Fence
from hookgate.tools.ledger import FinishedCall, PriorExecution

if TYPE_CHECKING:
    from hookgate.storage.database import Database


class DatabaseLedger:
    """Claims a (run, tool call) with an INSERT; a second claim finds the first one's row."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def claim(
        self, run_id: str, tool_call_id: str, tool_name: str, args_sha256: str,
        *, fence: Fence | None = None,
    ) -> PriorExecution | None:
        """None when this call claimed the record; the earlier claim's record otherwise.
        With ``fence``, only while that token is current (a fenced-out executor claims
        nothing: Fenced)."""
        return prior_execution(await self.db.backend.claim(
            (run_id, tool_call_id, tool_name, args_sha256), fence))

    async def recorded(self, run_id: str, tool_call_id: str) -> PriorExecution | None:
        """The record of (run, call) if one was claimed; None otherwise (one read)."""
        return prior_execution(await self.db.backend.recorded(run_id, tool_call_id))

    async def recorded_among(self, run_id: str, tool_call_ids: Sequence[str]
                             ) -> dict[str, PriorExecution]:
        """The records of up to three entries of one run, by key, in one read (an entry
        never claimed is not there)."""
        rows = await self.db.backend.recorded_among(run_id, tool_call_ids)
        return {key: executed(row) for key, row in rows.items()}

    async def claim_finished(self, run_id: str, tool_call_id: str, tool_name: str,
                             args_sha256: str, observation: str, ok: bool
                             ) -> PriorExecution | None:
        """`claim` then `finish` with ``observation`` in one write (a record known when it is
        claimed); the earlier claim's record, left as it was, if there was one."""
        return prior_execution(await self.db.backend.claim_finished(
            (run_id, tool_call_id, tool_name, args_sha256), observation, ok))

    async def claim_finished_reading(
            self, run_id: str, tool_call_id: str, tool_name: str, args_sha256: str,
            observation: str, ok: bool, among_run: str, among: Sequence[str],
    ) -> tuple[PriorExecution | None, dict[str, PriorExecution]]:
        """`claim_finished`, and `recorded_among` of ``among_run``'s ``among`` (another run's
        records) read with it: one statement where the backend can."""
        prior, held = await self.db.backend.claim_finished_reading(
            (run_id, tool_call_id, tool_name, args_sha256), observation, ok, among_run, among)
        return prior_execution(prior), {key: executed(row) for key, row in held.items()}

    def fenced(self, fence: Fence) -> FencedLedger:
        """This ledger as the executor holding ``fence`` may use it."""
        return FencedLedger(self, fence)

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool) -> None:
        await self.db.backend.finish(run_id, tool_call_id, observation, ok)

    async def finish_all(self, finishes: Sequence[FinishedCall]) -> None:
        """Each `finish` in order, in one write where the backend can (SQLite: one
        transaction; PostgreSQL: one statement each in autocommit, as `finish`)."""
        await self.db.backend.finish_all(finishes)


def prior_execution(row: PriorRow | None) -> PriorExecution | None:
    """The earlier claim's record from its row."""
    return None if row is None else executed(row)


def executed(row: PriorRow) -> PriorExecution:
    """A record from its row."""
    return PriorExecution(row.observation, row.ok, row.tool_name, row.args_sha256)


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
