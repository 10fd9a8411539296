"""What the MCP gateway reads to name a call's attempt (mcp/attempts.py): the latest request
of a keyed run, and how many requests and executions the run has so far."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import func, select

from hookgate.storage.confirmations import ConfirmationRecord, record_of
from hookgate.storage.database import Database
from hookgate.storage.tables import ConfirmationRequestRow, ToolExecutionRow

_Row = ConfirmationRequestRow


async def joinable_or_count(db: Database, run_id: str,
                            joinable: Callable[[ConfirmationRecord], bool]
                            ) -> ConfirmationRecord | int:
    """The run's latest request when ``joinable`` says a call may join it; else how many
    requests plus executions the run has so far (in the same read)."""
    async with db.session() as s:
        latest = (await s.execute(select(_Row).where(_Row.run_id == run_id)
                                  .order_by(_Row.created_at.desc()).limit(1))
                  ).scalar_one_or_none()
        if latest is not None and joinable(record := record_of(latest)):
            return record
        requests = (await s.execute(select(func.count()).select_from(_Row)
                                    .where(_Row.run_id == run_id))).scalar_one()
        executions = (await s.execute(select(func.count()).select_from(ToolExecutionRow)
                                      .where(ToolExecutionRow.run_id == run_id))).scalar_one()
    return int(requests) + int(executions)


async def request_of(db: Database, run_id: str, tool_call_id: str
                     ) -> ConfirmationRecord | None:
    async with db.session() as s:
        row = (await s.execute(select(_Row).where(
            _Row.run_id == run_id, _Row.tool_call_id == tool_call_id))).scalar_one_or_none()
    return record_of(row) if row is not None else None
