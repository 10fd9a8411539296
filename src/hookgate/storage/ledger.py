"""The at-most-once execution ledger in the ``tool_executions`` table.

A claim and a finish are each one write on the database's raw lane (SQLite's group commit,
PostgreSQL's prepared statements in autocommit); SQLAlchemy serves only SQLite in memory.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError

from hookgate.storage.database import Database
from hookgate.storage.fencing import FENCE_SQLITE, Fence
from hookgate.storage.pg_lane import PgLane
from hookgate.storage.sqlite_lane import SqliteLane, sqlite_timestamp
from hookgate.storage.tables import ToolExecutionRow
from hookgate.storage.types import utcnow
from hookgate.tools.ledger import PriorExecution

_CLAIM_SQLITE = ("INSERT INTO tool_executions (run_id, tool_call_id, tool_name, args_sha256, "
                 "started_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING")
_PRIOR_SQLITE = ("SELECT observation, ok, tool_name, args_sha256 FROM tool_executions "
                 "WHERE run_id = ? AND tool_call_id = ?")
_FINISH_SQLITE = ("UPDATE tool_executions SET observation = ?, ok = ?, finished_at = ? "
                  "WHERE run_id = ? AND tool_call_id = ?")
_CLAIM_PG = ("INSERT INTO tool_executions (run_id, tool_call_id, tool_name, args_sha256, "
             "started_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING")
_PRIOR_PG = ("SELECT observation, ok, tool_name, args_sha256 FROM tool_executions "
             "WHERE run_id = $1 AND tool_call_id = $2")
#: A fenced claim in one statement: the fence read under a key-share lock (held until the
#: statement commits, so a takeover waits for it), the row inserted only while the token is
#: current, and the earlier claim's record read beside it. $1..$5 the row, $6 the token,
#: $7 the run whose fence counts (the run itself, or the root a delegated child runs under).
_CLAIM_FENCED_PG = (
    "WITH f AS (SELECT fence FROM runs WHERE id = $7 FOR KEY SHARE), "
    "ins AS (INSERT INTO tool_executions (run_id, tool_call_id, tool_name, args_sha256, "
    "started_at) SELECT $1::text, $2::text, $3::text, $4::text, $5::timestamptz "
    "WHERE (SELECT fence FROM f) = $6::bigint ON CONFLICT DO NOTHING RETURNING 1) "
    "SELECT (SELECT fence FROM f), EXISTS (SELECT 1 FROM ins), p.observation, p.ok, "
    "p.tool_name, p.args_sha256 FROM (SELECT 1) AS one LEFT JOIN tool_executions p "
    "ON p.run_id = $1::text AND p.tool_call_id = $2::text"
)
_FINISH_PG = ("UPDATE tool_executions SET observation = $1, ok = $2, finished_at = $3 "
              "WHERE run_id = $4 AND tool_call_id = $5")


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
        lane = SqliteLane.for_database(self.db)
        if lane is not None:
            at = sqlite_timestamp(utcnow())
            prior = await lane.write(lambda conn: _claim_sqlite(
                conn, (run_id, tool_call_id, tool_name, args_sha256, at), fence))
            return _prior(prior)
        pg = PgLane.for_database(self.db)
        if pg is not None:
            return _prior(await self._claim_pg(
                pg, (run_id, tool_call_id, tool_name, args_sha256, utcnow()), fence))
        return await self._claim_orm(run_id, tool_call_id, tool_name, args_sha256, fence)

    @staticmethod
    async def _claim_pg(pg: PgLane, row: tuple[Any, ...], fence: Fence | None) -> Any:
        if fence is None:  # one statement in autocommit; the rare repeat reads afterwards
            if await pg.execute(_CLAIM_PG, *row) == "INSERT 0 1":
                return None
            return await pg.fetchrow(_PRIOR_PG, *row[:2])
        found = await pg.fetchrow(_CLAIM_FENCED_PG, *row, fence.token, fence.run_id)
        fence.refuse_unless(found[0])
        if found[1]:
            return None
        if found[4] is not None:
            return tuple(found)[2:]
        # The other claim committed after this statement's snapshot: read it now.
        return await pg.fetchrow(_PRIOR_PG, *row[:2])

    async def _claim_orm(self, run_id: str, tool_call_id: str, tool_name: str,
                         args_sha256: str, fence: Fence | None) -> PriorExecution | None:
        try:
            async with self.db.transaction() as s:
                if fence is not None:
                    await fence.check(s)
                s.add(ToolExecutionRow(run_id=run_id, tool_call_id=tool_call_id,
                                       tool_name=tool_name, args_sha256=args_sha256))
        except IntegrityError:
            prior = await self.recorded(run_id, tool_call_id)
            if prior is None:
                raise
            return prior
        return None

    async def recorded(self, run_id: str, tool_call_id: str) -> PriorExecution | None:
        """The record of (run, call) if one was claimed; None otherwise (one read, on the
        raw lanes where there is one)."""
        lane = SqliteLane.for_database(self.db)
        if lane is not None:
            return _prior(await lane.read(
                lambda conn: conn.execute(_PRIOR_SQLITE, (run_id, tool_call_id)).fetchone()))
        pg = PgLane.for_database(self.db)
        if pg is not None:
            return _prior(await pg.fetchrow(_PRIOR_PG, run_id, tool_call_id))
        async with self.db.session() as s:
            row = await s.get(ToolExecutionRow, (run_id, tool_call_id))
        if row is None:
            return None
        return PriorExecution(row.observation, row.ok, row.tool_name, row.args_sha256)

    def fenced(self, fence: Fence) -> FencedLedger:
        """This ledger as the executor holding ``fence`` may use it."""
        return FencedLedger(self, fence)

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool) -> None:
        lane = SqliteLane.for_database(self.db)
        if lane is not None:
            params = (observation, ok, sqlite_timestamp(utcnow()), run_id, tool_call_id)
            await lane.write(lambda conn: conn.execute(_FINISH_SQLITE, params))
            return
        pg = PgLane.for_database(self.db)
        if pg is not None:
            await pg.execute(_FINISH_PG, observation, ok, utcnow(), run_id, tool_call_id)
            return
        async with self.db.transaction() as s:
            await s.execute(
                update(ToolExecutionRow)
                .where(ToolExecutionRow.run_id == run_id,
                       ToolExecutionRow.tool_call_id == tool_call_id)
                .values(observation=observation, ok=ok, finished_at=utcnow())
            )


def _claim_sqlite(conn: sqlite3.Connection, row: tuple[Any, ...], fence: Fence | None
                  ) -> Any:
    if fence is not None:
        fence.refuse_unless(_first(conn.execute(FENCE_SQLITE, (fence.run_id,)).fetchone()))
    if conn.execute(_CLAIM_SQLITE, row).rowcount == 1:
        return None
    return conn.execute(_PRIOR_SQLITE, row[:2]).fetchone()


def _first(row: Any) -> Any:
    return row[0] if row is not None else None


def _prior(row: Any) -> PriorExecution | None:
    """The earlier claim's record from its row (observation, ok, tool_name, args_sha256)."""
    if row is None:
        return None
    observation, ok, tool_name, args_sha256 = row[0], row[1], row[2], row[3]
    return PriorExecution(observation, None if ok is None else bool(ok), tool_name,
                          args_sha256)


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
