"""The PostgreSQL backend: several instances on one database, its clock, its row locks,
NOTIFY (or a publisher) for wake-ups, and the PgDriver (pg_driver.py: asyncpg connections of its
own, statements prepared per connection, autocommit for single statements).

Most operations run the statements compiled once in statements.py. A few are written here
only, as this backend's own implementation of the operation, because PostgreSQL does it in
ONE round trip where the generic statements take several, and the round trips are what a
run waits on: a fenced checkpoint or event batch (data-modifying CTEs that write only while
the fence is current, under the same row locks as ``Fence.check``, with the NOTIFY), a
takeover (the row locked FOR UPDATE, which waits for the writes in flight, then the fence
raised and the state read), a fenced ledger claim (with the earlier claim's record), a run's
summary with its event log, an event batch as arrays (``unnest``), and an audit append to a
chain head this process wrote last (the head updated only if still the remembered one).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import JSON, Boolean, Integer, Table, func, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from hookgate.engines.events import RunEvent, event_of
from hookgate.storage.backends.base import (
    GENESIS,
    NOT_NOW,
    AlongWrite,
    AuditGroups,
    AuditLink,
    ClaimRow,
    FactRead,
    FactRow,
    LedgerFinish,
    NotNow,
    PriorRow,
    RunSummaryRow,
    UserRow,
    VoteExists,
)
from hookgate.storage.backends.limit_claims import claim_on_postgresql
from hookgate.storage.backends.pg_driver import (
    DriverTransaction,
    PgDriver,
    counted_psycopg_statements,
    psycopg_statements,
)
from hookgate.storage.backends.statements import (
    AUDIT_COLUMNS,
    CHECKPOINT_COLUMNS,
    CHECKPOINT_PARAMS,
    Compiled,
    DialectName,
    among_keys,
    audit_row_values,
    compiled,
)
from hookgate.storage.fencing import Fence
from hookgate.storage.limit_claim_model import Claimed, Want
from hookgate.storage.run_writes import (
    RUN_EVENTS_CHANNEL,
    Checkpoint,
    checkpoint_row,
    event_data_text,
    events_note,
)
from hookgate.storage.tables import ApprovalVoteRow, ConfirmationRequestRow
from hookgate.storage.types import UTCDateTime, utcnow

if TYPE_CHECKING:
    from hookgate.storage.database import Database
    from hookgate.storage.transaction import Transaction

#: pg_advisory_lock key held while a process migrates and syncs ("hookgate" in ASCII).
STARTUP_LOCK_KEY = 0x686F6F6B67617465
MIGRATION_LOCK_KEY = STARTUP_LOCK_KEY + 1
#: The SQLAlchemy pool's connections per process (requests beyond wait).
POOL_SIZE = 30


@cache
def _s(name: str) -> Compiled:
    return compiled(name, "postgresql")


_UPDATED = ", ".join(f"{c} = excluded.{c}" for c in CHECKPOINT_COLUMNS[1:])
_COLUMN_LIST = ", ".join(CHECKPOINT_PARAMS)
# One statement for a whole batch: arrays of the columns, unnested into rows.
_EVENTS = ("INSERT INTO run_events (run_id, seq, type, data, created_at) "
           "SELECT $1, s, t, d::json, $5::timestamptz FROM unnest($2::int[], $3::text[], "
           "$4::text[]) AS e(s, t, d) ON CONFLICT (run_id, seq) DO NOTHING")
_NOTIFY = "SELECT pg_notify($1, $2)"

_NC = len(CHECKPOINT_PARAMS)  # the upsert's parameters: the columns, created_at, fence
#: Each parameter cast to its column's type: in a SELECT list PostgreSQL cannot infer it.
_ROW_TYPES = {"updated_at": "timestamptz", "created_at": "timestamptz", "fence": "bigint"}
_ROW = ", ".join(f"${i}::{_ROW_TYPES.get(c, 'text')}" for i, c in enumerate(
    CHECKPOINT_PARAMS, 1))
#: $1..$13 the row, $14 the fence token (NULL: unfenced), $15..$17 the events' arrays,
#: $18 their time, $19 the channel (NULL: notify nobody), $20 the note, $21 the run whose
#: fence counts (the run itself, or the root a delegated child writes under). The run's
#: own write notifies only while the run is followed from another process (``followed``,
#: read under the row lock that `mark_followed` takes too); a child's always does.
_FENCED = f"(${_NC + 1}::bigint IS NULL OR (SELECT fence FROM f) = ${_NC + 1}::bigint)"
_WRITE = (
    f"WITH f AS (SELECT fence, followed FROM runs WHERE id = ${_NC + 8} FOR NO KEY UPDATE), "
    f"up AS (INSERT INTO runs ({_COLUMN_LIST}) SELECT {_ROW} WHERE {_FENCED} "
    f"ON CONFLICT (id) DO UPDATE SET {_UPDATED} RETURNING 1), "
    f"ev AS (INSERT INTO run_events (run_id, seq, type, data, created_at) "
    f"SELECT $1, s, t, d::json, ${_NC + 5}::timestamptz FROM unnest(${_NC + 2}::int[], "
    f"${_NC + 3}::text[], ${_NC + 4}::text[]) AS e(s, t, d) WHERE EXISTS (SELECT 1 FROM up) "
    f"ON CONFLICT (run_id, seq) DO NOTHING RETURNING 1), "
    f"n AS (SELECT pg_notify(${_NC + 6}, ${_NC + 7}) WHERE ${_NC + 6}::text IS NOT NULL "
    f"AND cardinality(${_NC + 2}::int[]) > 0 AND EXISTS (SELECT 1 FROM up) "
    f"AND (${_NC + 8} <> $1 OR coalesce((SELECT followed FROM f), true))) "
    f"SELECT EXISTS (SELECT 1 FROM up), (SELECT fence FROM f), (SELECT count(*) FROM ev), "
    f"(SELECT count(*) FROM n)"
)


def _finishes_by_key(first: int, count: int, at: str) -> list[str]:
    """``count`` finishes as ``UPDATE``s of one ledger record each, its whole key in the
    ``WHERE`` (observation, ok, run and call from parameter ``first`` on, four each;
    finished at ``at``). An ``UPDATE … FROM unnest(…)`` join was planned, in a generic plan
    made while the table was small, as a hash join over a scan of the whole table, which
    PostgreSQL kept; one record's lookup by its whole key is an index scan in any plan
    (decision record 0047)."""
    return [f"UPDATE tool_executions SET observation = ${n}::text, ok = ${n + 1}::bool, "
            f"finished_at = {at} WHERE run_id = ${n + 2}::text AND tool_call_id = ${n + 3}::text"
            for n in range(first, first + 4 * count, 4)]


#: The checkpoint carrying the ledger's records (``write_run``'s ``finishes`` and ``claim``):
#: ``_WRITE``, plus, after its parameters, the results of calls whose tool has run, four
#: parameters each (written whatever the fence says: the tool did run, and its result is
#: true), and a call to claim (four parameters), inserted only with the fenced checkpoint,
#: the earlier claim's record read beside it (as ``_CLAIM_FENCED``). Each part is in the
#: statement only when the write has one: a CTE that writes nothing still costs PostgreSQL
#: its executor's set-up and locks at every execution (a third of a checkpoint's time:
#: decision record 0035).
#: The result's columns are the same in every form.
_WRITE_HEAD = _WRITE.split(" SELECT EXISTS (SELECT 1 FROM up), (SELECT fence", 1)[0]
_WRITE_LAST = _NC + 8  # _WRITE's last parameter


@cache
def _write_carrying(finishes: int, claim: bool) -> str:
    """``_WRITE`` with a CTE ``fin0``, ``fin1``… per finish (``finishes`` of them,
    `_finishes_by_key`) and the claim's ``cl`` (``claim``), their parameters numbered after
    ``_WRITE``'s, finishes first."""
    n, ctes = _WRITE_LAST, ""
    updates = _finishes_by_key(n + 1, finishes, f"${_NC + 5}::timestamptz")
    ctes += "".join(f", fin{i} AS ({u} RETURNING 1)" for i, u in enumerate(updates))
    n += 4 * finishes
    prior = "NULL, NULL, NULL, NULL FROM (SELECT 1) AS one"
    if claim:
        ctes += (", cl AS (INSERT INTO tool_executions (run_id, tool_call_id, tool_name, "
                 f"args_sha256, started_at) SELECT ${n + 1}::text, ${n + 2}::text, "
                 f"${n + 3}::text, ${n + 4}::text, ${_NC + 5}::timestamptz "
                 "WHERE EXISTS (SELECT 1 FROM up) ON CONFLICT DO NOTHING RETURNING 1)")
        prior = ("p.observation, p.ok, p.tool_name, p.args_sha256 FROM (SELECT 1) AS one "
                 f"LEFT JOIN tool_executions p ON p.run_id = ${n + 1}::text "
                 f"AND p.tool_call_id = ${n + 2}::text")
    return (f"{_WRITE_HEAD}{ctes} SELECT EXISTS (SELECT 1 FROM up), (SELECT fence FROM f), "
            "(SELECT count(*) FROM ev), (SELECT count(*) FROM n), "
            + ("(" + " + ".join(f"(SELECT count(*) FROM fin{i})" for i in range(finishes))
               + "), " if finishes else "0, ")
            + ("EXISTS (SELECT 1 FROM cl), " if claim else "false, ") + prior)


def _last_parameter(sql: str) -> int:
    """The highest ``$n`` of ``sql``: a statement joined after it numbers its own from there."""
    return max((int(n) for n in re.findall(r"\$(\d+)", sql)), default=0)


@cache
def _fact_finishing(insert: str, count: int) -> str:
    """A session's fact (``insert``: its one-statement write, parameters ``$1``..``$n``)
    and ``count`` ledger finishes (`_finishes_by_key`, finished at ``$n+1``, theirs after
    it) in one statement: the fact's ``INSERT`` and all but the last finish as its CTEs,
    the last as the statement."""
    assert count > 0
    at = _last_parameter(insert) + 1
    *ctes, last = _finishes_by_key(at + 1, count, f"${at}::timestamptz")
    parts = [f"fact AS ({insert})", *(f"f{i} AS ({u})" for i, u in enumerate(ctes))]
    return f"WITH {', '.join(parts)} {last}"


@cache
def _claim_reading(claim: str, among: str) -> str:
    """The claim's ``INSERT … ON CONFLICT DO NOTHING`` (``claim``) as a CTE, then its count
    as a row whose key is NULL, then ``among``'s rows (its parameters numbered after the
    claim's): a claim and a read of another run's records in one statement."""
    assert claim.endswith("ON CONFLICT DO NOTHING"), claim
    base = _last_parameter(claim)
    shifted = re.sub(r"\$(\d+)", lambda n: f"${int(n.group(1)) + base}", among)
    return (f"WITH cl AS ({claim} RETURNING 1) SELECT NULL::varchar, "
            "(SELECT count(*) FROM cl)::text, NULL::boolean, NULL::varchar, NULL::varchar "
            f"UNION ALL {shifted}")


def _among(rows: Sequence[Any]) -> dict[str, PriorRow]:
    """`recorded_among`'s records by key from its rows (key, observation, ok, tool, digest)."""
    return {str(r[0]): PriorRow(r[1], None if r[2] is None else bool(r[2]), r[3], r[4])
            for r in rows}


#: The fenced checkpoint of the run's own row (``fence.run_id`` is the run): the fence
#: checked by the UPDATE itself, which takes the same row lock as ``f`` (``FOR NO KEY
#: UPDATE``: a takeover's ``FOR UPDATE`` waits for it, and it waits for a takeover, then
#: finds the raised token on the row's newest version) and returns the ``followed`` flag
#: under it. Without ``f``'s read and lock, and the upsert's conflict check, a checkpoint
#: costs PostgreSQL a sixth less (decision record 0035). A fenced row that is not there is
#: not written, as with ``f``. Its parameters are ``_WRITE``'s less created_at, the new
#: row's fence and the fenced run ($12, $13, $21: ``_OWN_DROPPED``), renumbered.
_OWN_DROPPED = (_NC - 1, _NC, _NC + 8)
_OWN_HEAD = ("WITH up AS (UPDATE runs SET " + ", ".join(
    f"{c} = ${i}::{_ROW_TYPES.get(c, 'text')}" for i, c in enumerate(CHECKPOINT_COLUMNS[1:], 2))
    + f" WHERE id = $1 AND fence = ${_NC + 1}::bigint RETURNING fence, followed), ")
_FOLLOWED_UNDER_F = f"AND (${_NC + 8} <> $1 OR coalesce((SELECT followed FROM f), true)))"


@cache
def _own_form(sql: str) -> str:
    """``sql`` (``_WRITE``, a carrying form, with or without an ``AlongWrite``) as the
    fenced checkpoint of the run's own row (``_OWN_HEAD``), renumbered."""
    head = _WRITE[:_WRITE.index("ev AS (")]
    assert sql.startswith(head) and _FOLLOWED_UNDER_F in sql
    own = (_OWN_HEAD + sql[len(head):]).replace(
        _FOLLOWED_UNDER_F, "AND coalesce((SELECT followed FROM up), true))").replace(
        "(SELECT fence FROM f)",
        "coalesce((SELECT fence FROM up), (SELECT fence FROM runs WHERE id = $1))")

    def number(found: re.Match[str]) -> str:
        n = int(found.group(1))
        assert n not in _OWN_DROPPED, sql
        return f"${n - sum(d < n for d in _OWN_DROPPED)}"

    return re.sub(r"\$(\d+)", number, own)


def _own_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A checkpoint's parameters for `_own_form`."""
    a, b, c = (d - 1 for d in _OWN_DROPPED)
    return (*args[:a], *args[b + 1:c], *args[c + 1:])


#: Events alone: $1 the run, $2 the fence token (NULL: unfenced), $3..$5 the arrays, $6 the
#: time, $7 the channel (NULL: notify nobody), $8 the note, $9 the run whose fence counts.
_EVENTS_ONLY = (
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
#: A stream in another process follows the run: its writes NOTIFY from now on.
_MARK_FOLLOWED = "UPDATE runs SET followed = true WHERE id = $1 AND NOT followed"
#: The takeover in one statement (one round trip on the way from a decision to the tool):
#: the row locked FOR UPDATE in the CTE, which waits for every write in flight under the
#: old token (the UPDATE alone takes the weaker no-key lock, which would not wait for their
#: key-share locks), then the token raised and the state read.
_TAKE_OVER = (
    "WITH held AS (SELECT id FROM runs WHERE id = $1 FOR UPDATE) "
    "UPDATE runs SET fence = runs.fence + 1, followed = true, updated_at = $2 FROM held "
    "WHERE runs.id = held.id RETURNING runs.fence, runs.state_json")
#: A fenced claim in one statement: the fence read under a key-share lock (held until the
#: statement commits, so a takeover waits for it), the row inserted only while the token is
#: current, and the earlier claim's record read beside it. $1..$5 the row, $6 the token,
#: $7 the run whose fence counts (the run itself, or the root a delegated child runs under).
_CLAIM_FENCED = (
    "WITH f AS (SELECT fence FROM runs WHERE id = $7 FOR KEY SHARE), "
    "ins AS (INSERT INTO tool_executions (run_id, tool_call_id, tool_name, args_sha256, "
    "started_at) SELECT $1::text, $2::text, $3::text, $4::text, $5::timestamptz "
    "WHERE (SELECT fence FROM f) = $6::bigint ON CONFLICT DO NOTHING RETURNING 1) "
    "SELECT (SELECT fence FROM f), EXISTS (SELECT 1 FROM ins), p.observation, p.ok, "
    "p.tool_name, p.args_sha256 FROM (SELECT 1) AS one LEFT JOIN tool_executions p "
    "ON p.run_id = $1::text AND p.tool_call_id = $2::text"
)
#: The summary and the run's whole event log in one statement (one snapshot: a status that
#: says the run ended comes with every event it committed with that status).
_SUMMARY_LOGGED = (
    "SELECT r.org_id, r.status, r.state_json, (SELECT json_agg(json_build_array(e.type, "
    "e.data, e.seq) ORDER BY e.seq) FROM run_events e WHERE e.run_id = r.id AND e.seq > $2) "
    "FROM runs r WHERE r.id = $1")
#: PostgreSQL types of the audit columns after ``chain``, for the arrays ``unnest`` spreads.
_AUDIT_TYPES = {"seq": "bigint", "created_at": "timestamptz", "result_chars": "bigint",
                "latency_us": "bigint", "wait_us": "bigint", "hash_v": "smallint",
                "depth": "smallint"}
_AUDIT_HEAD_MOVED = (
    "WITH head AS (UPDATE audit_chain_heads SET last_seq = $2, last_hash = $3 "
    "WHERE chain = $1 AND last_seq = $4 AND last_hash = $5 RETURNING chain) "
    f"INSERT INTO connector_call_logs ({', '.join(AUDIT_COLUMNS)}) ")
#: Rows appended after the head this process wrote last, only if it still is the head.
_AUDIT_IF_HEAD = (
    _AUDIT_HEAD_MOVED + "SELECT head.chain, r.* FROM head, unnest("
    + ", ".join(f"${i}::{_AUDIT_TYPES.get(c, 'text')}[]"
                for i, c in enumerate(AUDIT_COLUMNS[1:], 6))
    + f") AS r({', '.join(AUDIT_COLUMNS[1:])})")
#: The same for one record, with plain parameters: no arrays to build and send.
_AUDIT_ONE_IF_HEAD = (
    _AUDIT_HEAD_MOVED + "SELECT head.chain, "
    + ", ".join(f"${i}::{_AUDIT_TYPES.get(c, 'text')}"
                for i, c in enumerate(AUDIT_COLUMNS[1:], 6))
    + " FROM head")


#: The requests' columns, JSON ones read as text (asyncpg gives text, psycopg would decode:
#: one form from either connection) and decoded here, as SQLAlchemy's JSON type does.
_REQUEST_TABLE = cast(Table, ConfirmationRequestRow.__table__)
_REQUEST_NAMES = tuple(c.name for c in _REQUEST_TABLE.columns)
_REQUEST_JSON = frozenset(c.name for c in _REQUEST_TABLE.columns if isinstance(c.type, JSON))
_REQUEST_TIMES = frozenset(c.name for c in _REQUEST_TABLE.columns
                           if isinstance(c.type, UTCDateTime))
_REQUEST_SELECT = "SELECT " + ", ".join(
    f'"{n}"::text' if n in _REQUEST_JSON else f'"{n}"' for n in _REQUEST_NAMES
) + " FROM confirmation_requests "
_REQUEST_BY_ID = _REQUEST_SELECT + "WHERE id = $1"
#: The call's own request first, else the run's latest rejected one for the same tool and
#: arguments (as ``EngineReads.request_at_use``: PostgreSQL sorts NULL first in DESC).
_REQUEST_AT_USE = _REQUEST_SELECT + (
    "WHERE run_id = $1 AND (tool_call_id = $2 OR (tool_name = $3 AND args_sha256 = $4 "
    "AND status = 'rejected')) ORDER BY tool_call_id = $2 DESC, responded_at DESC LIMIT 1")
_SESSION_FACTS = ("SELECT kind, trusted, source, text, call_id FROM session_facts "
                  "WHERE session = $1 ORDER BY id")
_VOTE_TABLE = cast(Table, ApprovalVoteRow.__table__)
#: The dialect whose bind processing the driver's statements apply to their values.
PG_DIALECT = postgresql.dialect(paramstyle="numeric_dollar")  # type: ignore[no-untyped-call]


def _cast_of(column: Any) -> str:
    """The type a parameter for ``column`` is cast to (no length: a value too long is
    refused by the column, not cut by the cast)."""
    kind = column.type
    if isinstance(kind, JSON):
        return "json"
    if isinstance(kind, UTCDateTime):
        return "timestamptz"
    if isinstance(kind, Boolean):
        return "boolean"
    if isinstance(kind, Integer):
        return "bigint"
    return "text"


def column_binds(table: Table, columns: Sequence[str]
                 ) -> tuple[Callable[[Any], Any] | None, ...]:
    """How SQLAlchemy binds a value of each of ``columns`` on PostgreSQL (an aware time
    checked; JSON as its text, None as JSON's ``null``, as SQLAlchemy's JSON type writes
    it; None: as it is), for statements on the driver."""
    return tuple(_json_text if isinstance(table.c[c].type, JSON)
                 else table.c[c].type.bind_processor(PG_DIALECT) for c in columns)


def _json_text(value: Any) -> str:
    return json.dumps(value)


def bound(binds: Sequence[Callable[[Any], Any] | None], values: Sequence[Any]) -> list[Any]:
    return [v if b is None else b(v) for b, v in zip(binds, values, strict=True)]


_AT_BIND = column_binds(_REQUEST_TABLE, ("responded_at",))


@cache
def _change_sql(decision: tuple[str, ...], vote: tuple[str, ...] | None, unexpired: bool,
                at_now: bool) -> tuple[str, tuple[Callable[[Any], Any] | None, ...]]:
    """A request's compare-and-set from ``pending``, and with ``vote`` the decider's vote
    inserted from the changed row (only if it changed: a data-modifying WITH runs whether
    read or not), in ONE statement; the row comes back as `_REQUEST_SELECT` reads it.
    $1 the request, $2 the status, $3 the time (``at_now``: the database's clock, no
    parameter), then the ``decision`` columns, then the ``vote`` columns. Built once per
    set of columns; the values' binds with it."""
    t, n = _REQUEST_TABLE, 3 if at_now else 4
    when = "now()" if at_now else "$3::timestamptz"
    sets = "".join(f', "{c}" = ${i}::{_cast_of(t.c[c])}' for i, c in enumerate(decision, n))
    where = "id = $1 AND status = 'pending'" + (f" AND expires_at > {when}" if unexpired
                                                else "")
    returning = _REQUEST_SELECT.removeprefix("SELECT ").removesuffix(
        " FROM confirmation_requests ")
    sql = (f"WITH changed AS (UPDATE confirmation_requests SET status = $2, "
           f"responded_at = {when}{sets} WHERE {where} RETURNING {returning})")
    binds = column_binds(t, decision)
    if vote is not None:
        first = n + len(decision)
        values = ", ".join(f"${i}::{_cast_of(_VOTE_TABLE.c[c])}"
                           for i, c in enumerate(vote, first))
        sql += (f", cast_vote AS (INSERT INTO approval_votes (request_id, "
                f"{', '.join(vote)}) SELECT id, {values} FROM changed)")
        binds += column_binds(_VOTE_TABLE, vote)
    return sql + " SELECT * FROM changed", binds


def _request(row: Any) -> dict[str, Any] | None:
    if row is None:
        return None
    out = dict(zip(_REQUEST_NAMES, row, strict=True))
    for name in _REQUEST_JSON:
        value = out[name]
        if value is not None:
            out[name] = json.loads(value)
    for name in _REQUEST_TIMES:
        value = out[name]
        if value is not None:
            out[name] = value.astimezone(UTC)
    return out


class PostgresBackend:
    """A PostgreSQL database's backend (asyncpg or psycopg behind SQLAlchemy)."""

    dialect: DialectName = "postgresql"
    in_process = False
    locks_rows = True
    sqlite_file = None
    #: A checkpoint carries the ledger's records (a call's claim, results) in its statement.
    carries_ledger = True
    #: Reads run in autocommit: no BEGIN and ROLLBACK around a one-statement read (two round
    #: trips), and psycopg keeps its prepared statements (a ROLLBACK deallocates them all).
    #: Under READ COMMITTED every statement takes its own snapshot anyway.
    reads_in_autocommit = True

    @staticmethod
    def engine_options() -> dict[str, Any]:
        # At most POOL_SIZE connections, all kept open once made: connections "beyond the
        # pool" (max_overflow) are closed whenever they are handed back, and under load each
        # checkout then opens a new one (bench/throughput.py at concurrency 64: a new
        # connection every eighth run, 26% fewer runs/s than without).
        return {"pool_size": POOL_SIZE, "max_overflow": 0}

    @staticmethod
    def prepare_engine(engine: AsyncEngine) -> None:
        return None

    def __init__(self, db: Database) -> None:
        self.db = db
        self.driver = PgDriver(db)
        #: chain -> (last seq, last hash) as this process last committed them.
        self._audit_heads: dict[str, tuple[int, str]] = {}
        #: SQL of a new run's row followed by another statement (`insert_run_with`).
        self._with_run: dict[str, str] = {}
        self._with_along: dict[tuple[str, str, str], str] = {}

    def now_expression(self) -> Any:
        return func.now()

    async def now(self) -> datetime:
        # One statement in autocommit on the driver: no session, BEGIN or ROLLBACK.
        value = (await self.driver.fetchrow("SELECT now()"))[0]
        return value.astimezone(UTC)  # type: ignore[no-any-return]

    @asynccontextmanager
    async def startup_lock(self) -> AsyncIterator[None]:
        async with self.db.engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": STARTUP_LOCK_KEY})
            await conn.commit()
            try:
                yield
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"),
                                   {"k": STARTUP_LOCK_KEY})
                await conn.commit()

    async def lock_migrations(self, conn: AsyncConnection) -> None:
        # One migrator at a time; the others find it done.
        await conn.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                           {"k": MIGRATION_LOCK_KEY})

    async def begin_new_schema(self, conn: AsyncConnection) -> bool:
        await self.lock_migrations(conn)
        found = await conn.exec_driver_sql(
            "SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = current_schema()")
        return not found.scalar_one()

    async def notify(self, session: Transaction, channel: str, payload: str) -> None:
        if isinstance(session, DriverTransaction):
            # Sent with the transaction's COMMIT (one round trip), or published after it.
            if self.db.publisher is not None:
                session.published.append((channel, payload))
            else:
                session.notify(channel, payload)
        elif self.db.publisher is not None:
            self.db.queue_note(session, channel, payload)
        else:
            # On the session's own connection, in its transaction (sent at its commit), as
            # the driver's prepared statement: SQLAlchemy's execute path cost more than the
            # round trip (decision record 0028).
            raw = await (await session.connection()).get_raw_connection()
            await counted_psycopg_statements(raw.driver_connection).execute(
                _NOTIFY, channel, payload)

    # -- runs --------------------------------------------------------------------------

    async def write_run(self, run_id: str, *, checkpoint: Checkpoint | None,
                        events: Sequence[RunEvent], fence: Fence | None,
                        finishes: Sequence[LedgerFinish] = (),
                        claim: ClaimRow | None = None,
                        along: AlongWrite | None = None) -> PriorRow | None:
        now = utcnow()
        arrays = ([e.seq for e in events], [e.type for e in events],
                  [event_data_text(e) for e in events], now)
        channel = RUN_EVENTS_CHANNEL if events and self.db.publisher is None else None
        note = events_note(run_id, events) if events else ""
        token, fenced_run = (fence.token, fence.run_id) if fence is not None else (None, run_id)
        own = fence is not None and fence.run_id == run_id  # its own row's fence: _own_form
        prior: PriorRow | None = None
        if checkpoint is not None and (finishes or claim is not None or along is not None):
            carried = tuple(v for f in finishes
                            for v in (f.observation, f.ok, f.run_id, f.tool_call_id))
            sql = self._along(_write_carrying(len(finishes), claim is not None), along)
            args = (*checkpoint_row(checkpoint, now), token, *arrays, channel, note,
                    fenced_run, *carried, *(claim or ()),
                    *(along.args if along is not None else ()))
            if own:
                sql, args = _own_form(sql), _own_args(args)
            row = await self.driver.fetchrow(sql, *args)
            if along is not None:
                along.seen(row[-1])
            if claim is not None and row[0] and not row[5]:
                # Claimed before; or by another claim that committed after this
                # statement's snapshot: read it now.
                prior = (_prior(tuple(row)[6:10]) if row[8] is not None
                         else await self.recorded(claim[0], claim[1]))
        elif checkpoint is not None:
            args = (*checkpoint_row(checkpoint, now), token, *arrays, channel, note,
                    fenced_run)
            row = await (self.driver.fetchrow(_own_form(_WRITE), *_own_args(args)) if own
                         else self.driver.fetchrow(_WRITE, *args))
        else:
            row = await self.driver.fetchrow(_EVENTS_ONLY, run_id, token, *arrays, channel,
                                           note, fenced_run)
        written, current = row[0], row[1]
        if fence is not None and not written:
            # Nothing was written: the token moved, or the run is gone. Fenced either way.
            fence.refuse_unless(None if current == fence.token else current)
        if events and self.db.publisher is not None:  # committed: wake the followers
            await self.db.publisher.publish([(RUN_EVENTS_CHANNEL, events_note(run_id, events))])
        return prior

    def _along(self, sql: str, along: AlongWrite | None) -> str:
        """``sql`` (the carrying checkpoint) with ``along``'s CTEs and result (its last
        column), its parameters numbered after the checkpoint's."""
        if along is None:
            return sql
        key = (sql, along.ctes, along.result)
        found = self._with_along.get(key)
        if found is None:
            base = _last_parameter(sql)
            ctes, result = (re.sub(r"\$P(\d+)", lambda m: f"${base + int(m.group(1))}", x)
                            for x in (along.ctes, along.result))
            head, _, select = sql.rpartition(" SELECT EXISTS (SELECT 1 FROM up), ")
            columns, _, source = select.partition(" FROM (SELECT 1) AS one")
            found = self._with_along[key] = (
                f"{head}, {ctes} SELECT EXISTS (SELECT 1 FROM up), {columns}, ({result}) "
                f"FROM (SELECT 1) AS one{source}")
        return found

    async def write_in_session(self, session: AsyncSession, run_id: str, *,
                               checkpoint: Checkpoint | None, events: Sequence[RunEvent],
                               fence: Fence | None) -> None:
        # The driver's prepared statements on the session's own connection: building the
        # same upsert through SQLAlchemy cost more than the round trips.
        now = utcnow()
        raw = await (await session.connection()).get_raw_connection()
        conn = psycopg_statements(raw.driver_connection)
        if fence is not None:
            lock = _s("fence_update" if checkpoint is not None else "fence_share")
            found = await conn.fetchrow(lock.sql, fence.run_id)
            fence.refuse_unless(found[0] if found is not None else None)
        if checkpoint is not None:
            upsert = _s("checkpoint_upsert")
            await conn.execute(upsert.sql, *upsert.args(checkpoint_row(checkpoint, now)))
        if events:
            await conn.execute(_EVENTS, run_id, [e.seq for e in events],
                               [e.type for e in events],
                               [event_data_text(e) for e in events], now)
            if self.db.publisher is None:
                await conn.execute(_NOTIFY, RUN_EVENTS_CHANNEL, events_note(run_id, events))
            else:  # published once the caller's transaction commits
                self.db.queue_note(session, RUN_EVENTS_CHANNEL, events_note(run_id, events))

    async def insert_run_with(self, then: str, checkpoint: Checkpoint, *args: Any,
                              fence: int = 0) -> Any:
        """A new run's row and, only once it is stored, ``then`` — SQL that reads the
        CTE ``up`` and takes ``args`` from ``$14`` on — in ONE statement; its first row."""
        sql = self._with_run.get(then)
        upsert = _s("checkpoint_upsert")
        if sql is None:
            sql = self._with_run[then] = f"WITH up AS ({upsert.sql} RETURNING 1) {then}"
        row = upsert.args(checkpoint_row(checkpoint, utcnow(), fence=fence))
        return await self.driver.fetchrow(sql, *row, *args)

    async def take_over(self, run_id: str) -> tuple[Fence, str] | None:
        found = await self.driver.fetchrow(_TAKE_OVER, run_id, utcnow())
        return (Fence(run_id, int(found[0])), str(found[1])) if found is not None else None

    async def events_after(self, run_id: str, seq: int) -> list[RunEvent]:
        return [_event(row) for row in await self.driver.fetch(_s("events_after").sql,
                                                             run_id, seq)]

    async def run_summary(self, run_id: str, *, with_log: bool, after: int
                          ) -> RunSummaryRow | None:
        if with_log:
            row = await self.driver.fetchrow(_SUMMARY_LOGGED, run_id, after)
            return None if row is None else RunSummaryRow(
                row[0], str(row[1]), str(row[2]), aggregated_events(row[3]))
        found = await self.driver.fetchrow(_s("summary").sql, run_id)
        return None if found is None else RunSummaryRow(found[0], str(found[1]),
                                                        str(found[2]), None)

    # -- the hooks' records ------------------------------------------------------------

    async def claim(self, row: tuple[str, str, str, str], fence: Fence | None
                    ) -> PriorRow | None:
        values = (*row, utcnow())
        if fence is None:  # one statement in autocommit; the rare repeat reads afterwards
            if await self.driver.execute(_s("claim").sql, *values) == "INSERT 0 1":
                return None
            return await self.recorded(row[0], row[1])
        found = await self.driver.fetchrow(_CLAIM_FENCED, *values, fence.token, fence.run_id)
        fence.refuse_unless(found[0])
        if found[1]:
            return None
        if found[4] is not None:
            return _prior(tuple(found)[2:])
        # The other claim committed after this statement's snapshot: read it now.
        return await self.recorded(row[0], row[1])

    async def claim_finished(self, row: tuple[str, str, str, str], observation: str,
                             ok: bool) -> PriorRow | None:
        # One statement in autocommit; the rare repeat reads afterwards.
        at = utcnow()
        insert = _s("claim_finished")
        if await self.driver.execute(insert.sql, *insert.args(
                (*row, at, observation, ok, at))) == "INSERT 0 1":
            return None
        return await self.recorded(row[0], row[1])

    async def recorded(self, run_id: str, tool_call_id: str) -> PriorRow | None:
        return _prior(await self.driver.fetchrow(_s("prior").sql, run_id, tool_call_id))

    async def recorded_among(self, run_id: str, keys: Sequence[str]
                             ) -> dict[str, PriorRow]:
        among = _s("prior_among")
        return _among(await self.driver.fetch(among.sql, *among.args(
            (run_id, *among_keys(keys)))))

    async def claim_finished_reading(self, row: tuple[str, str, str, str], observation: str,
                                     ok: bool, run_id: str, keys: Sequence[str]
                                     ) -> tuple[PriorRow | None, dict[str, PriorRow]]:
        # One statement in autocommit: the claim and the read share a round trip and a
        # snapshot (decision record 0048); the rare repeat reads afterwards.
        at = utcnow()
        claim, among = _s("claim_finished"), _s("prior_among")
        rows = await self.driver.fetch(
            _claim_reading(claim.sql, among.sql), *claim.args((*row, at, observation, ok, at)),
            *among.args((run_id, *among_keys(keys))))
        claimed = any(r[0] is None and r[1] == "1" for r in rows)
        held = _among([r for r in rows if r[0] is not None])
        return (None if claimed else await self.recorded(row[0], row[1])), held

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool
                     ) -> None:
        finish = _s("finish")
        await self.driver.execute(finish.sql, *finish.args(
            (observation, ok, utcnow(), run_id, tool_call_id)))

    async def finish_all(self, finishes: Sequence[LedgerFinish]) -> None:
        # One statement each in autocommit (a transaction around them would add two round
        # trips).
        for f in finishes:
            await self.finish(f.run_id, f.tool_call_id, f.observation, f.ok)

    async def org_read_only(self, org_id: str) -> bool | None:
        # One statement in autocommit: no BEGIN/ROLLBACK around it.
        row = await self.driver.fetchrow(_s("org_read_only").sql, org_id)
        return None if row is None or row[0] is None else bool(row[0])

    async def add_fact(self, row: FactRow, *, once: bool = False) -> None:
        # One statement in autocommit: no BEGIN/COMMIT around it.
        insert = _s("fact_insert_once" if once else "fact_insert")
        await self.driver.execute(insert.sql, *insert.args((*row, utcnow())))

    async def add_fact_finishing(self, row: FactRow, finishes: Sequence[LedgerFinish], *,
                                 once: bool = False) -> None:
        # One statement in autocommit: the fact and the finishes, both or neither (a
        # transaction around the three would take five round trips; decision record 0046).
        if not finishes:
            return await self.add_fact(row, once=once)
        insert, at = _s("fact_insert_once" if once else "fact_insert"), utcnow()
        await self.driver.execute(
            _fact_finishing(insert.sql, len(finishes)), *insert.args((*row, at)), at,
            *(v for f in finishes for v in (f.observation, f.ok, f.run_id, f.tool_call_id)))

    async def session_facts(self, session: str) -> list[FactRead]:
        # One statement in autocommit on the driver (through an ORM session: a checkout,
        # BEGIN, the read, ROLLBACK, and SQLAlchemy's execute path around each).
        return [(str(r[0]), bool(r[1]), str(r[2]), str(r[3]), r[4])
                for r in await self.driver.fetch(_SESSION_FACTS, session)]

    async def request_columns(self, request_id: str) -> dict[str, Any] | None:
        return _request(await self.driver.fetchrow(_REQUEST_BY_ID, request_id))

    async def request_at_use(self, run_id: str, tool_call_id: str, tool_name: str,
                             args_sha256: str) -> dict[str, Any] | None:
        return _request(await self.driver.fetchrow(_REQUEST_AT_USE, run_id, tool_call_id,
                                                   tool_name, args_sha256))

    @asynccontextmanager
    async def change_transaction(self) -> AsyncIterator[Transaction]:
        # The driver's transaction (asyncpg): through an ORM session the change's BEGIN,
        # statements and COMMIT cost most of a decision's CPU (decision record 0032).
        async with self.driver.work_transaction() as tx:
            yield tx
        if tx.published and self.db.publisher is not None:  # committed: wake the readers
            await self.db.publisher.publish(tx.published)

    async def change_request(self, tx: Transaction, request_id: str, status: str, *,
                             now: datetime | None, unexpired: bool,
                             decision: dict[str, Any], vote: dict[str, Any] | None
                             ) -> dict[str, Any] | None:
        assert isinstance(tx, DriverTransaction), "a transaction of change_transaction()"
        sql, binds = _change_sql(tuple(decision), None if vote is None else tuple(vote),
                                 unexpired, now is None)
        values = [*decision.values(), *(vote.values() if vote is not None else ())]
        head = (request_id, status) if now is None else (request_id, status,
                                                         *bound(_AT_BIND, (now,)))
        try:
            row = await tx.conn.fetchrow(sql, *head, *bound(binds, values))
        except Exception as exc:
            if getattr(exc, "sqlstate", None) != "23505" or vote is None:
                raise
            # The vote's unique (request, user) key, in the same statement: nothing changed.
            raise VoteExists(f"'{vote.get('user_id')}' already voted on request "
                             f"{request_id}") from None
        return _request(row)

    async def token_user(self, digest: str) -> tuple[UserRow, bool] | None:
        # One statement in autocommit (an ORM session spent four: BEGIN, two reads, ROLLBACK).
        read = _s("token_user")
        row = await self.driver.fetchrow(read.sql, *read.args((digest,)))
        return None if row is None else (_user(row), bool(row[7]))

    async def person(self, user_id: str) -> UserRow | None:
        row = await self.driver.fetchrow(_s("person").sql, user_id)
        return None if row is None else _user(row)

    async def mark_followed(self, run_id: str) -> None:
        # Under the row's lock, which a checkpoint takes too: a checkpoint committed before
        # this is in the log the stream reads next; one after it sees the flag and notifies.
        await self.driver.execute(_MARK_FOLLOWED, run_id)

    async def take_rate_slot(self, key: str, start: int, limit: int) -> bool:
        # One atomic statement: autocommit is its transaction.
        take = _s("rate_take")
        return await self.driver.fetchrow(take.sql, *take.args((key, start, limit))) is not None

    async def claim_limits(self, call_key: str, wants: Sequence[Want], now: float | None
                           ) -> Claimed:
        return await claim_on_postgresql(self.driver, call_key, wants, now)

    def append_audit_now(self, groups: AuditGroups, link: AuditLink
                         ) -> list[list[Any]] | NotNow:
        return NOT_NOW

    async def append_audit(self, groups: AuditGroups, link: AuditLink) -> list[list[Any]]:
        if len(groups) == 1 and groups[0][0] in self._audit_heads:
            chain, records = groups[0]
            last_seq, last_hash = self._audit_heads.pop(chain)  # back only once committed
            rows, out = link(chain, records, last_seq + len(records), last_hash)
            head = (chain, out[-1].seq, out[-1].row_hash, last_seq, last_hash)
            if len(rows) == 1:
                status = await self.driver.execute(
                    _AUDIT_ONE_IF_HEAD, *head, *(rows[0][c] for c in AUDIT_COLUMNS[1:]))
            else:
                status = await self.driver.execute(
                    _AUDIT_IF_HEAD, *head,
                    *([row[c] for row in rows] for c in AUDIT_COLUMNS[1:]))
            if status == f"INSERT 0 {len(records)}":
                self._audit_heads[chain] = (out[-1].seq, out[-1].row_hash)
                return [out]
            # Another process appended since: take the lock and read the head.
        async with self.driver.transaction() as conn:
            appended = [await _append_chain(conn, chain, group, link)
                        for chain, group in groups]
        for (chain, _), out in zip(groups, appended, strict=True):
            self._audit_heads[chain] = (out[-1].seq, out[-1].row_hash)
        return appended


async def _append_chain(conn: Any, chain: str, records: Sequence[Any], link: AuditLink
                        ) -> list[Any]:
    """Reserve the seq numbers (the head's row lock), insert the rows, move the head."""
    reserve, insert, set_head = _s("audit_reserve"), _s("audit_insert"), _s("audit_set_head")
    last_seq, prev = await conn.fetchrow(reserve.sql,
                                         *reserve.args((chain, len(records), GENESIS)))
    rows, out = link(chain, records, last_seq, prev)
    await conn.executemany(insert.sql, [insert.args(audit_row_values(row))
                                        for row in rows])
    await conn.execute(set_head.sql, *set_head.args((out[-1].row_hash, chain)))
    return out


def _user(row: Any) -> UserRow:
    expires = row[6]
    return UserRow(row[0], row[1], bool(row[2]), row[3], bool(row[4]), bool(row[5]),
                   None if expires is None else expires.astimezone(UTC))


def _prior(row: Any) -> PriorRow | None:
    if row is None:
        return None
    return PriorRow(row[0], None if row[1] is None else bool(row[1]), row[2], row[3])


def _event(row: Any) -> RunEvent:
    # asyncpg hands the JSON column over as text; psycopg has parsed it.
    data = json.loads(row[1]) if isinstance(row[1], str | bytes) else row[1]
    return event_of(str(row[0]), dict(data or {}), int(row[2]))


def aggregated_events(value: str | list[Any] | None) -> list[RunEvent]:
    """Events a statement gathered with ``json_agg(json_build_array(type, data, seq))``
    (NULL: none); asyncpg hands the JSON over as text, psycopg has parsed it."""
    if value is None:
        return []
    items = json.loads(value) if isinstance(value, str | bytes) else value
    return [event_of(str(kind), dict(data or {}), int(seq)) for kind, data, seq in items]
