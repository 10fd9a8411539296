"""The run layer's hot writes: a checkpoint (the ``runs`` row) with the events emitted
since the last write, and event batches alone, each in ONE transaction under the run's
fence. On a SQLite file they take the SqliteLane (group commit), on PostgreSQL the PgLane
(prepared statements, no ORM); elsewhere (SQLite in memory) SQLAlchemy Core.

On PostgreSQL a write is ONE statement in autocommit (one round trip instead of BEGIN, the
fence read, the upsert, the events, the notification and COMMIT): data-modifying CTEs that
run only while the fence is current. The fence is read under the same row locks as
``Fence.check`` takes (a checkpoint's FOR NO KEY UPDATE, an event batch's FOR KEY SHARE),
held until the statement commits, so a takeover still waits for the write in flight.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from hookgate.engines.events import RunEvent
from hookgate.storage.database import Database
from hookgate.storage.fencing import FENCE_PG, FENCE_SQLITE, Fence
from hookgate.storage.pg_lane import PgLane, psycopg_statements
from hookgate.storage.sqlite_lane import SqliteLane, sqlite_timestamp
from hookgate.storage.tables import RunEventRow, RunRow
from hookgate.storage.types import utcnow

#: NOTIFY channel whose payload is the id of a run that has new events.
RUN_EVENTS_CHANNEL = "hookgate_run_events"


def events_note(run_id: str, events: Sequence[RunEvent]) -> str:
    """The notification of a write of ``events``: ``RUN_ID SEQ``, the highest seq written
    (a follower that has it already reads nothing)."""
    return f"{run_id} {max(e.seq for e in events)}"

#: The columns a checkpoint sets, in the order of the statements' parameters.
CHECKPOINT_COLUMNS = ("id", "agent_id", "org_id", "user_id", "conversation_id", "engine",
                      "status", "state_json", "answer", "error", "updated_at")
_UPDATED = ", ".join(f"{c} = excluded.{c}" for c in CHECKPOINT_COLUMNS[1:])
_COLUMN_LIST = ", ".join((*CHECKPOINT_COLUMNS, "created_at", "fence"))

_UPSERT_SQLITE = (f"INSERT INTO runs ({_COLUMN_LIST}) VALUES "
                  f"({', '.join('?' * (len(CHECKPOINT_COLUMNS) + 2))}) "
                  f"ON CONFLICT (id) DO UPDATE SET {_UPDATED}")
_EVENTS_SQLITE = ("INSERT INTO run_events (run_id, seq, type, data, created_at) "
                  "VALUES (?, ?, ?, ?, ?) ON CONFLICT (run_id, seq) DO NOTHING")

#: A checkpoint's upsert alone (parameters: checkpoint_row), e.g. inside a larger statement.
UPSERT_PG = (f"INSERT INTO runs ({_COLUMN_LIST}) VALUES "
              f"({', '.join(f'${i}' for i in range(1, len(CHECKPOINT_COLUMNS) + 3))}) "
              f"ON CONFLICT (id) DO UPDATE SET {_UPDATED}")
# One statement for a whole batch: arrays of the columns, unnested into rows.
_EVENTS_PG = ("INSERT INTO run_events (run_id, seq, type, data, created_at) "
              "SELECT $1, s, t, d::json, $5::timestamptz FROM unnest($2::int[], $3::text[], "
              "$4::text[]) "
              "AS e(s, t, d) ON CONFLICT (run_id, seq) DO NOTHING")
_NOTIFY_PG = "SELECT pg_notify($1, $2)"

_NC = len(CHECKPOINT_COLUMNS) + 2  # the upsert's parameters: the columns, created_at, fence
#: Each parameter cast to its column's type: in a SELECT list PostgreSQL cannot infer it.
_ROW_TYPES = {"updated_at": "timestamptz", "created_at": "timestamptz", "fence": "bigint"}
_ROW_PG = ", ".join(f"${i}::{_ROW_TYPES.get(c, 'text')}" for i, c in enumerate(
    (*CHECKPOINT_COLUMNS, "created_at", "fence"), 1))
#: $1..$13 the row, $14 the fence token (NULL: unfenced), $15..$17 the events' arrays,
#: $18 their time, $19 the channel (NULL: notify nobody), $20 the note, $21 the run whose
#: fence counts (the run itself, or the root a delegated child writes under).
_FENCED = f"(${_NC + 1}::bigint IS NULL OR (SELECT fence FROM f) = ${_NC + 1}::bigint)"
_WRITE_PG = (
    f"WITH f AS (SELECT fence FROM runs WHERE id = ${_NC + 8} FOR NO KEY UPDATE), "
    f"up AS (INSERT INTO runs ({_COLUMN_LIST}) SELECT {_ROW_PG} WHERE {_FENCED} "
    f"ON CONFLICT (id) DO UPDATE SET {_UPDATED} RETURNING 1), "
    f"ev AS (INSERT INTO run_events (run_id, seq, type, data, created_at) "
    f"SELECT $1, s, t, d::json, ${_NC + 5}::timestamptz FROM unnest(${_NC + 2}::int[], "
    f"${_NC + 3}::text[], ${_NC + 4}::text[]) AS e(s, t, d) WHERE EXISTS (SELECT 1 FROM up) "
    f"ON CONFLICT (run_id, seq) DO NOTHING RETURNING 1), "
    f"n AS (SELECT pg_notify(${_NC + 6}, ${_NC + 7}) WHERE ${_NC + 6}::text IS NOT NULL "
    f"AND cardinality(${_NC + 2}::int[]) > 0 AND EXISTS (SELECT 1 FROM up)) "
    f"SELECT EXISTS (SELECT 1 FROM up), (SELECT fence FROM f), (SELECT count(*) FROM ev), "
    f"(SELECT count(*) FROM n)"
)
#: Events alone: $1 the run, $2 the fence token (NULL: unfenced), $3..$5 the arrays, $6 the
#: time, $7 the channel (NULL: notify nobody), $8 the note, $9 the run whose fence counts.
_EVENTS_ONLY_PG = (
    "WITH f AS (SELECT fence FROM runs WHERE id = $9 FOR KEY SHARE), "
    "ok AS (SELECT 1 WHERE $2::bigint IS NULL OR (SELECT fence FROM f) = $2::bigint), "
    "ev AS (INSERT INTO run_events (run_id, seq, type, data, created_at) "
    "SELECT $1, s, t, d::json, $6::timestamptz FROM unnest($3::int[], $4::text[], $5::text[]) "
    "AS e(s, t, d) WHERE EXISTS (SELECT 1 FROM ok) "
    "ON CONFLICT (run_id, seq) DO NOTHING RETURNING 1), "
    "n AS (SELECT pg_notify($7, $8) WHERE $7::text IS NOT NULL AND EXISTS (SELECT 1 FROM ok)) "
    "SELECT EXISTS (SELECT 1 FROM ok), (SELECT fence FROM f), (SELECT count(*) FROM ev), "
    "(SELECT count(*) FROM n)"
)


@dataclass(slots=True, frozen=True)
class Checkpoint:
    """A run's row as a checkpoint writes it (the stored state is ``state_json``)."""

    values: tuple[Any, ...]  # in CHECKPOINT_COLUMNS' order

    @property
    def run_id(self) -> str:
        return str(self.values[0])

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(CHECKPOINT_COLUMNS, self.values, strict=True))


def event_data_text(event: RunEvent) -> str:
    """An event's data as the JSON column stores it (SQLAlchemy's JSON type's default)."""
    return json.dumps(event.data)


async def write_run(db: Database, run_id: str, *, checkpoint: Checkpoint | None,
                    events: Sequence[RunEvent], fence: Fence | None) -> None:
    """Store ``checkpoint`` and ``events`` (a seq already stored is kept as it was) in one
    transaction, only while ``fence`` (if any) is current (else Fenced, nothing stored).
    On PostgreSQL the commit notifies the run's followers when there are events."""
    if checkpoint is None and not events:
        return
    now = utcnow()
    lane = SqliteLane.for_database(db)
    if lane is not None:
        at = sqlite_timestamp(now)
        rows = [(run_id, e.seq, e.type, event_data_text(e), at) for e in events]
        values = None if checkpoint is None else checkpoint_row(checkpoint, at)
        await lane.write(lambda conn: _write_sqlite(conn, run_id, values, rows, fence))
        return
    pg = PgLane.for_database(db)
    if pg is not None:
        await _write_pg(db, pg, run_id, checkpoint, events, fence, now)
        if events and db.publisher is not None:  # committed: wake the followers (Redis)
            await db.publisher.publish([(RUN_EVENTS_CHANNEL, events_note(run_id, events))])
        return
    async with db.transaction() as s:
        await write_in_session(db, s, run_id, checkpoint=checkpoint, events=events,
                               fence=fence)


async def write_in_session(db: Database, s: AsyncSession, run_id: str, *,
                           checkpoint: Checkpoint | None, events: Sequence[RunEvent],
                           fence: Fence | None) -> None:
    """`write_run` inside the caller's SQLAlchemy transaction (e.g. with a queued job)."""
    now = utcnow()
    if db.engine.dialect.driver == "psycopg":
        # The lane's prepared statements on the session's own connection: building the
        # same upsert through SQLAlchemy cost more than the round trips.
        raw = await (await s.connection()).get_raw_connection()
        conn = psycopg_statements(raw.driver_connection)
        if fence is not None:
            fence.refuse_unless(_first(await conn.fetchrow(
                FENCE_PG[checkpoint is not None], fence.run_id)))
        if checkpoint is not None:
            await conn.execute(UPSERT_PG, *checkpoint_row(checkpoint, now))
        if events:
            await conn.execute(_EVENTS_PG, run_id, [e.seq for e in events],
                               [e.type for e in events],
                               [event_data_text(e) for e in events], now)
            if db.publisher is None:
                await conn.execute(_NOTIFY_PG, RUN_EVENTS_CHANNEL, events_note(run_id, events))
            else:  # published once the caller's transaction commits
                await db.notify(s, RUN_EVENTS_CHANNEL, events_note(run_id, events))
        return
    if fence is not None:
        await fence.check(s, updates_run=checkpoint is not None)
    insert = sqlite_insert if db.is_sqlite else pg_insert
    if checkpoint is not None:
        values = {**checkpoint.as_dict(), "updated_at": now}
        stmt = insert(RunRow).values(created_at=now, **values)
        await s.execute(stmt.on_conflict_do_update(
            index_elements=[RunRow.id], set_={k: v for k, v in values.items() if k != "id"}))
    if events:
        await s.execute(insert(RunEventRow).values([
            {"run_id": run_id, "seq": e.seq, "type": e.type, "data": e.data,
             "created_at": now} for e in events
        ]).on_conflict_do_nothing(index_elements=["run_id", "seq"]))
        await db.notify(s, RUN_EVENTS_CHANNEL, events_note(run_id, events))


def checkpoint_row(checkpoint: Checkpoint, at: datetime | str, *,
                   fence: int = 0) -> tuple[Any, ...]:
    """The upsert's parameters (UPSERT_PG's $1..$13): updated_at is the write's time;
    created_at and ``fence`` only count for a new row (0: no executor has taken it yet)."""
    return (*checkpoint.values[:-1], at, at, fence)


def _write_sqlite(conn: sqlite3.Connection, run_id: str, checkpoint: tuple[Any, ...] | None,
                  events: list[tuple[Any, ...]], fence: Fence | None) -> None:
    if fence is not None:  # the lane's IMMEDIATE transaction holds the write lock already
        row = conn.execute(FENCE_SQLITE, (fence.run_id,)).fetchone()
        fence.refuse_unless(row[0] if row is not None else None)
    if checkpoint is not None:
        conn.execute(_UPSERT_SQLITE, checkpoint)
    if events:
        conn.executemany(_EVENTS_SQLITE, events)


async def _write_pg(db: Database, pg: PgLane, run_id: str, checkpoint: Checkpoint | None,
                    events: Sequence[RunEvent], fence: Fence | None, now: datetime) -> None:
    arrays = ([e.seq for e in events], [e.type for e in events],
              [event_data_text(e) for e in events], now)
    channel = RUN_EVENTS_CHANNEL if events and db.publisher is None else None
    note = events_note(run_id, events) if events else ""
    token, fenced_run = (fence.token, fence.run_id) if fence is not None else (None, run_id)
    if checkpoint is not None:
        row = await pg.fetchrow(_WRITE_PG, *checkpoint_row(checkpoint, now), token, *arrays,
                                channel, note, fenced_run)
    else:
        row = await pg.fetchrow(_EVENTS_ONLY_PG, run_id, token, *arrays, channel, note,
                                fenced_run)
    written, current = row[0], row[1]
    if fence is not None and not written:
        # Nothing was written: the token moved, or the run is gone. Fenced either way.
        fence.refuse_unless(None if current == fence.token else current)


def _first(row: Any) -> Any:
    return row[0] if row is not None else None
