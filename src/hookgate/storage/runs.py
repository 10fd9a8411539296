"""Run checkpoints in the ``runs`` table: the engine saves its RunState as JSON.

The server's store keeps a run's trace in the event log only (``trace_in_log``): each
checkpoint commits the events emitted since the last one in its own transaction, so the log
holds every event of the stored state, and the state is stored without its trace (which
would otherwise be written again, whole, by every checkpoint). Loading such a state takes
the trace from the log; a state stored with its trace (by an earlier version, or by the
standalone store, which has no log) keeps it, and the longer of the two wins.

A run whose state cannot be saved is marked failed on its last good checkpoint
(`record_failure`), and a stored state that no longer loads is failed rather than resumed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.engines.events import RunEvent, event_of
from hookgate.engines.state import RunState
from hookgate.storage.backends.base import AlongWrite, ClaimRow, LedgerFinish
from hookgate.storage.database import Database
from hookgate.storage.ended_runs import EndedRuns
from hookgate.storage.fencing import Fence
from hookgate.storage.ledger import prior_execution
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.run_writes import Checkpoint, write_in_session, write_run
from hookgate.storage.tables import RunRow
from hookgate.storage.transaction import Transaction, statements
from hookgate.storage.types import utcnow
from hookgate.tools.ledger import PriorExecution

RESUMABLE = ("running", "awaiting_approval")


@dataclass(slots=True, frozen=True)
class RunSummary:
    """What the API needs of a stored run to answer about it."""

    org_id: str | None
    status: str
    state_json: str
    #: The run's event log, when it was asked for with the row.
    logged: list[RunEvent] | None = None
log = logging.getLogger(__name__)


class DatabaseRunStore:
    """Implements the engines' RunStore: one upsert per checkpoint.

    With ``trace_in_log`` (the server, whose checkpoints carry the run's events not yet
    logged) the trace is stored in the event log only; see the module docstring."""

    def __init__(self, db: Database, *, trace_in_log: bool = False) -> None:
        self.db = db
        self.trace_in_log = trace_in_log
        #: The runs whose end this store committed, read back from memory for a while
        #: (storage/ended_runs.py); the server's store only, whose trace is complete.
        self.ended: EndedRuns | None = EndedRuns() if trace_in_log else None

    async def save(self, state: RunState, *, fence: Fence | None = None,
                   session: AsyncSession | None = None,
                   events: Sequence[RunEvent] = (), along: AlongWrite | None = None) -> None:
        """Upsert the checkpoint, with ``events`` (the run's events not yet logged) in the
        same transaction; with ``fence``, only while that token is current; with
        ``session``, inside the caller's transaction (e.g. with the job that runs it)."""
        checkpoint = self.checkpoint(state)
        if session is not None:
            if along is not None:
                raise ValueError("work along a checkpoint needs the backend's own write")
            await write_in_session(self.db, session, state.run_id, checkpoint=checkpoint,
                                   events=events, fence=fence)
            return
        await write_run(self.db, state.run_id, checkpoint=checkpoint, events=events,
                        fence=fence, along=along)
        self._committed(state, checkpoint)

    async def save_carrying(self, state: RunState, *, finishes: Sequence[LedgerFinish],
                            claim: ClaimRow | None, fence: Fence | None = None,
                            events: Sequence[RunEvent] = (),
                            along: AlongWrite | None = None) -> PriorExecution | None:
        """`save` with the ledger's records in its transaction (a backend that
        ``carries_ledger`` only; the caller fences the claim as its ledger would):
        ``finishes`` whatever the fence says, ``claim`` only with the fenced checkpoint.
        The earlier claim's record if the call was claimed before (as `DatabaseLedger`)."""
        checkpoint = self.checkpoint(state)
        row = await write_run(self.db, state.run_id, checkpoint=checkpoint,
                              events=events, fence=fence, finishes=finishes, claim=claim,
                              along=along)
        self._committed(state, checkpoint)
        return prior_execution(row)

    def _committed(self, state: RunState, checkpoint: Checkpoint) -> None:
        """``checkpoint`` of ``state`` is committed: an end is kept in memory for a while
        (only with its whole trace, which ends with its ``done``)."""
        trace = state.trace
        if self.ended is not None and state.finished and trace \
                and trace[-1].get("type") == "done":
            self.ended.ended(state.run_id, state.org_id, state.status,
                             checkpoint.state_json, state.trace)

    def checkpoint(self, state: RunState) -> Checkpoint:
        """The row a checkpoint of ``state`` writes."""
        return Checkpoint((
            state.run_id, state.agent_id, state.org_id, state.user_id,
            state.conversation_id, state.engine, state.status,
            state.to_json(trace=not self.trace_in_log),
            state.answer, state.error, None))

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
        if not self.trace_in_log:
            failed.trace.append({"type": "error", "seq": len(failed.trace) + 1,
                                 "error": error, "status": "failed"})
            failed.trace.append({"type": "done", "seq": len(failed.trace) + 1,
                                 "status": "failed", "answer": None})
            await self.save(failed, fence=fence)
            return
        # The end goes to the log with the failed state, numbered after every event the run
        # emitted (``state`` holds them all; some may not have reached the log).
        await self._attach_log(failed)
        last = max(len(failed.trace), len(state.trace))
        end = [event_of("error", {"error": error, "status": "failed"}, last + 1),
               event_of("done", {"status": "failed", "answer": None}, last + 2)]
        await self.save(failed, fence=fence, events=end)

    async def _attach_log(self, state: RunState) -> RunState:
        """``state`` with its trace from the event log, when the log holds more of it."""
        state.trace = whole_trace(state.trace, await RunEventLog(self.db).after(state.run_id, 0))
        return state

    async def load(self, run_id: str) -> RunState | None:
        """The stored state with its whole trace (from the event log when it is kept there)."""
        async with self.db.session() as s:
            row = await s.get(RunRow, run_id)
            state = RunState.from_json(row.state_json) if row else None
        if state is not None and self.trace_in_log:
            await self._attach_log(state)
        return state

    async def load_to_resume(self, run_id: str, fence: Fence | None = None
                             ) -> RunState | None:
        """The run's state to continue it; None if there is no run, or if its stored state
        no longer loads: then it is marked failed here (under ``fence``), as `resumable`
        does, instead of failing every attempt to continue it. The trace is as stored (see
        `Runner.prepare`, which completes it from the event log)."""
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

    async def summary(self, run_id: str, *, with_log: bool = False,
                      after: int = 0) -> RunSummary | None:
        """The run's org, status and stored state: one statement on the backend's fast
        path (the API reads this on every request about a run). ``with_log``: its logged
        events with seq > ``after`` too (``logged``), on PostgreSQL in the same statement."""
        ended = self.ended.get(run_id) if self.ended is not None else None
        if ended is not None:  # final: as this process committed it
            return RunSummary(ended.org_id, ended.status, ended.state_json,
                              ended.events_after(after) if with_log else None)
        found = await self.db.backend.run_summary(run_id, with_log=with_log, after=after)
        if found is None:
            return None
        logged = found.logged
        if with_log and logged is None:
            logged = await RunEventLog(self.db).after(run_id, after)
        return RunSummary(found.org_id, found.status, found.state_json, logged)

    async def mark_followed(self, run_id: str) -> None:
        """A stream in this process follows the run while it advances elsewhere: the run's
        writes must wake this process from now on."""
        await self.db.backend.mark_followed(run_id)

    async def row(self, run_id: str) -> RunRow | None:
        async with self.db.session() as s:
            return await s.get(RunRow, run_id)

    async def resumable(self) -> list[RunState]:
        """Runs that were in flight when their process stopped (traces as stored, as in
        `load_to_resume`). One whose stored state no longer loads is marked failed here,
        instead of failing every start after it."""
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


async def run_status(session: Transaction, run_id: str) -> str | None:
    """The run's status as ``session``'s transaction sees it; None when there is no run.
    On PostgreSQL (the run queue's), in a session's or a decision's driver transaction."""
    found = await (await statements(session)).fetchrow(_STATUS, run_id)
    return None if found is None else str(found[0])


_STATUS = "SELECT status FROM runs WHERE id = $1"


def whole_trace(stored: list[dict[str, Any]], logged: Sequence[RunEvent]
                ) -> list[dict[str, Any]]:
    """A run's trace: its event log's, unless the stored state holds more of it (a state
    stored with its trace by an earlier version, whose last events the log missed)."""
    return [e.to_dict() for e in logged] if len(logged) > len(stored) else stored


def _loaded(text: str) -> RunState | None:
    try:
        return RunState.from_json(text)
    except ValidationError:
        return None
