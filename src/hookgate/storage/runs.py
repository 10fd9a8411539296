"""Run checkpoints in the ``runs`` table: the engine saves its RunState as JSON.

A run whose state cannot be saved is marked failed on its last good checkpoint
(`record_failure`), and a stored state that no longer loads is failed rather than resumed.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.engines.state import RunState
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.tables import RunRow
from hookgate.storage.types import utcnow

RESUMABLE = ("running", "awaiting_approval")
log = logging.getLogger(__name__)


class DatabaseRunStore:
    """Implements the engines' RunStore: one upsert per checkpoint."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def save(self, state: RunState, *, fence: Fence | None = None,
                   session: AsyncSession | None = None) -> None:
        """Upsert the checkpoint; with ``fence``, only while that token is current; with
        ``session``, inside the caller's transaction (e.g. with the job that runs it)."""
        values = {
            "id": state.run_id,
            "agent_id": state.agent_id,
            "org_id": state.org_id,
            "user_id": state.user_id,
            "conversation_id": state.conversation_id,
            "engine": state.engine,
            "status": state.status,
            "state_json": state.to_json(),
            "answer": state.answer,
            "error": state.error,
            "updated_at": utcnow(),
        }
        insert = sqlite_insert if self.db.is_sqlite else pg_insert
        stmt = insert(RunRow).values(created_at=utcnow(), **values)
        stmt = stmt.on_conflict_do_update(
            index_elements=[RunRow.id],
            set_={k: v for k, v in values.items() if k != "id"},
        )
        if session is not None:
            await self._write(session, stmt, fence)
            return
        async with self.db.transaction() as s:
            await self._write(s, stmt, fence)

    @staticmethod
    async def _write(s: AsyncSession, stmt: Any, fence: Fence | None) -> None:
        if fence is not None:
            await fence.check(s, updates_run=True)
        await s.execute(stmt)

    async def record_failure(self, state: RunState, error: str, *,
                             fence: Fence | None = None) -> None:
        """Mark the run failed with ``error`` when ``state`` itself cannot be saved: the last
        stored checkpoint (or, without one, the run's identity) takes the failed status.
        With ``fence``, only while that token is current (else Fenced)."""
        async with self.db.session() as s:
            row = await s.get(RunRow, state.run_id)
            stored = _loaded(row.state_json) if row is not None else None
        failed = stored or RunState(
            run_id=state.run_id, engine=state.engine, agent_id=state.agent_id,
            user_id=state.user_id, org_id=state.org_id)
        failed.status = "failed"
        failed.error = error
        failed.trace.append({"type": "error", "seq": len(failed.trace) + 1, "error": error,
                             "status": "failed"})
        failed.trace.append({"type": "done", "seq": len(failed.trace) + 1,
                             "status": "failed", "answer": None})
        await self.save(failed, fence=fence)

    async def load(self, run_id: str) -> RunState | None:
        async with self.db.session() as s:
            row = await s.get(RunRow, run_id)
            return RunState.from_json(row.state_json) if row else None

    async def load_to_resume(self, run_id: str, fence: Fence | None = None
                             ) -> RunState | None:
        """The run's state to continue it; None if there is no run, or if its stored state
        no longer loads: then it is marked failed here (under ``fence``), as `resumable`
        does, instead of failing every attempt to continue it."""
        async with self.db.session() as s:
            row = await s.get(RunRow, run_id)
            text = row.state_json if row is not None else None
        if text is None:
            return None
        return await self.parse_to_resume(run_id, text, fence)

    async def parse_to_resume(self, run_id: str, text: str, fence: Fence | None = None
                              ) -> RunState | None:
        """``text`` (the run's stored state) loaded; None, and the run marked failed under
        ``fence``, if it no longer loads."""
        state = _loaded(text)
        if state is None:
            await self._fail_unreadable(run_id, fence)
        return state

    async def row(self, run_id: str) -> RunRow | None:
        async with self.db.session() as s:
            return await s.get(RunRow, run_id)

    async def resumable(self) -> list[RunState]:
        """Runs that were in flight when their process stopped. One whose stored state no
        longer loads is marked failed here, instead of failing every start after it."""
        async with self.db.session() as s:
            rows = (await s.execute(
                select(RunRow.id, RunRow.state_json).where(RunRow.status.in_(RESUMABLE))
                .order_by(RunRow.created_at)
            )).all()
        states = []
        for run_id, text in rows:
            state = _loaded(text)
            if state is not None:
                states.append(state)
                continue
            await self._fail_unreadable(run_id)
        return states

    async def _fail_unreadable(self, run_id: str, fence: Fence | None = None) -> None:
        reason = "the run's stored state cannot be read back; it cannot resume"
        log.error("run %s: %s", run_id, reason)
        async with self.db.transaction() as s:
            if fence is not None:
                await fence.check(s, updates_run=True)
            await s.execute(update(RunRow).where(RunRow.id == run_id).values(
                status="failed", error=reason, updated_at=utcnow()))

    async def list_for_org(self, org_id: str | None, limit: int = 50) -> list[RunRow]:
        async with self.db.session() as s:
            rows = (await s.execute(
                select(RunRow).where(RunRow.org_id == org_id)
                .order_by(RunRow.created_at.desc()).limit(limit)
            )).scalars().all()
        return list(rows)


def _loaded(text: str) -> RunState | None:
    try:
        return RunState.from_json(text)
    except ValidationError:
        return None
