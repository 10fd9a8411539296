"""The SQLite backend: a file served by one process (the embedded default), or a database in
memory (tests, demos).

A file's hot statements run on its SqliteDriver (sqlite_driver.py: the caller's thread when the
write lock is free, else group commit on the driver's thread); a database in memory exists
only on SQLAlchemy's one connection, so the same statements run there (``_EngineDriver``).
Either way each statement is the one compiled for SQLite in statements.py, executed on the
driver's own connection.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Connection
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
)
from hookgate.storage.backends.engine_changes import EngineChanges
from hookgate.storage.backends.engine_reads import EngineReads
from hookgate.storage.backends.limit_claims import claim_on_sqlite
from hookgate.storage.backends.sqlite_checkpoint import SAFETY_NET_PAGES
from hookgate.storage.backends.sqlite_driver import SqliteDriver, sqlite_timestamp
from hookgate.storage.backends.statements import (
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
from hookgate.storage.types import utcnow

if TYPE_CHECKING:
    from hookgate.storage.database import Database
    from hookgate.storage.transaction import Transaction

T = TypeVar("T")


class ClaimNotFound(RuntimeError):
    """A ledger claim found its entry taken, and then no record of it."""


@cache
def _s(name: str) -> Compiled:
    return compiled(name, "sqlite")


class DriverConnection(Protocol):
    """What the statements need of a connection: ``sqlite3.Connection``'s two methods."""

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any: ...


Work = Callable[[DriverConnection], T]


class _EngineDriver:
    """The driver of a database in memory: work on SQLAlchemy's connection (the only one that
    sees the database), inside one transaction per write."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def read(self, work: Work[T]) -> T:
        async with self.engine.connect() as conn:
            return await conn.run_sync(lambda c: work(_Driver(c)))

    def write_now(self, work: Work[T]) -> T | NotNow:
        return NOT_NOW

    async def write(self, work: Work[T]) -> T:
        async with self.engine.begin() as conn:
            return await conn.run_sync(lambda c: work(_Driver(c)))

    async def write_one(self, sql: str, params: Sequence[Any]) -> int:
        changed: int = await self.write(lambda conn: conn.execute(sql, params).rowcount)
        return changed


class _Driver:
    """A SQLAlchemy connection with ``sqlite3``'s statement methods (SQL as the driver
    takes it, no compilation)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._conn.exec_driver_sql(sql, tuple(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        return self._conn.exec_driver_sql(sql, [tuple(r) for r in rows])


class SqliteBackend(EngineReads, EngineChanges):
    """A SQLite database's backend: one process, its own clock, no row locks."""

    dialect: DialectName = "sqlite"
    in_process = True
    locks_rows = False
    #: A checkpoint carries the turn's first claim and the results before it (decision
    #: record 0041): fewer commits per run, each with what the ledger needs as before.
    carries_ledger = True
    #: One-statement reads need no autocommit session: SQLite's reads are local.
    reads_in_autocommit = False

    @staticmethod
    def engine_options() -> dict[str, Any]:
        """SQLAlchemy engine options: wait up to 30 s for another writer's lock."""
        return {"connect_args": {"timeout": 30}}

    @staticmethod
    def prepare_engine(engine: AsyncEngine) -> None:
        """Every connection in WAL mode, with foreign keys, a busy timeout, NORMAL sync."""
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)

    def __init__(self, db: Database) -> None:
        self.db = db
        file = self.sqlite_file
        if file is not None:
            driver = SqliteDriver(file)
            weakref.finalize(db, driver.close)
            self.driver: SqliteDriver | _EngineDriver = driver
            # SQLAlchemy's connections to the file leave the log to the same checkpointer
            # (decision record 0043): their commits count, and none checkpoints as it commits.
            engine = db.engine.sync_engine
            event.listen(engine, "connect", _leave_checkpoints)
            event.listen(engine, "commit", driver.checkpointer.engine_committed)
        else:
            self.driver = _EngineDriver(db.engine)
        #: Each chain's head as this backend last wrote it: (last seq, last hash). A guess,
        #: checked under the write lock by the append that uses it (decision record 0027).
        self._audit_heads: dict[str, tuple[int, str]] = {}

    @property
    def sqlite_file(self) -> str | None:
        path = self.db.engine.url.database
        if not path or path == ":memory:" or path.startswith("file:"):
            return None
        return path

    def now_expression(self) -> Any:
        return utcnow()

    async def now(self) -> datetime:
        # Only processes of one machine share a SQLite file: this process's clock.
        return utcnow()

    @asynccontextmanager
    async def startup_lock(self) -> AsyncIterator[None]:
        yield  # one process serves the file: nothing to serialise with

    async def lock_migrations(self, conn: AsyncConnection) -> None:
        return None  # the migration's transaction holds SQLite's one write lock

    async def begin_new_schema(self, conn: AsyncConnection) -> bool:
        # The driver would leave DDL outside any transaction: begin one, with the write lock.
        await conn.exec_driver_sql("BEGIN IMMEDIATE")
        found = await conn.exec_driver_sql(
            "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'")
        return not found.scalar_one()

    async def notify(self, session: Transaction, channel: str, payload: str) -> None:
        # One process serves the file and wakes its readers in memory; a publisher (Redis)
        # set on the database still carries the note once the transaction commits.
        if self.db.publisher is not None:
            assert isinstance(session, AsyncSession), "SQLite's transactions are sessions"
            self.db.queue_note(session, channel, payload)

    # -- runs --------------------------------------------------------------------------

    async def write_run(self, run_id: str, *, checkpoint: Checkpoint | None,
                        events: Sequence[RunEvent], fence: Fence | None,
                        finishes: Sequence[LedgerFinish] = (),
                        claim: ClaimRow | None = None,
                        along: AlongWrite | None = None) -> PriorRow | None:
        if along is not None:
            raise ValueError("the SQLite backend takes no work along a checkpoint")
        at = sqlite_timestamp(utcnow())
        rows = [(run_id, e.seq, e.type, event_data_text(e), at) for e in events]
        values = None if checkpoint is None else checkpoint_row(checkpoint, at)
        carried = None
        if checkpoint is not None and (finishes or claim is not None):
            finish = _s("finish")
            carried = _Carried([finish.args((f.observation, f.ok, at, f.run_id,
                                             f.tool_call_id)) for f in finishes],
                               None if claim is None else (*claim, at))
        if values is not None and not rows and fence is None and carried is None:
            # The checkpoint alone (a new run's row): one statement, in autocommit.
            upsert = _s("checkpoint_upsert")
            await self.driver.write_one(upsert.sql, upsert.args(values))
            return None
        written = await self.driver.write(
            lambda conn: _write(conn, values, rows, fence, carried))
        if fence is not None:  # after the commit: the results it carried are kept
            fence.refuse_unless(written.fence)
        if events and self.db.publisher is not None:
            await self.db.publisher.publish([(RUN_EVENTS_CHANNEL, events_note(run_id, events))])
        return _prior(written.prior)

    async def write_in_session(self, session: AsyncSession, run_id: str, *,
                               checkpoint: Checkpoint | None, events: Sequence[RunEvent],
                               fence: Fence | None) -> None:
        at = sqlite_timestamp(utcnow())
        rows = [(run_id, e.seq, e.type, event_data_text(e), at) for e in events]
        values = None if checkpoint is None else checkpoint_row(checkpoint, at)
        conn = await session.connection()
        written = await conn.run_sync(lambda c: _write(_Driver(c), values, rows, fence))
        if fence is not None:  # the caller's transaction is rolled back: nothing lands
            fence.refuse_unless(written.fence)
        if events:
            await self.notify(session, RUN_EVENTS_CHANNEL, events_note(run_id, events))

    async def take_over(self, run_id: str) -> tuple[Fence, str] | None:
        # A write: SQLite's one write lock, taken first, waits for every write in flight.
        take = _s("take_over")
        found = await self.driver.write(lambda conn: conn.execute(
            take.sql, take.args((sqlite_timestamp(utcnow()), run_id))).fetchone())
        return (Fence(run_id, int(found[0])), str(found[1])) if found is not None else None

    async def events_after(self, run_id: str, seq: int) -> list[RunEvent]:
        after = _s("events_after")
        rows = await self.driver.read(
            lambda c: c.execute(after.sql, (run_id, seq)).fetchall())
        return [event_of(str(r[0]), dict(json.loads(r[1]) or {}), int(r[2])) for r in rows]

    async def run_summary(self, run_id: str, *, with_log: bool, after: int
                          ) -> RunSummaryRow | None:
        summary = _s("summary")
        found = await self.driver.read(lambda c: c.execute(summary.sql, (run_id,)).fetchone())
        return None if found is None else RunSummaryRow(found[0], str(found[1]),
                                                        str(found[2]), None)

    # -- the hooks' records ------------------------------------------------------------

    async def claim(self, row: tuple[str, str, str, str], fence: Fence | None
                    ) -> PriorRow | None:
        values = (*row, sqlite_timestamp(utcnow()))
        if fence is not None:  # the fence read and the claim in one transaction
            return _prior(await self.driver.write(lambda conn: _claim(conn, values, fence)))
        if await self.driver.write_one(_s("claim").sql, values) == 1:
            return None
        return await self._claimed_before(row)

    async def claim_finished(self, row: tuple[str, str, str, str], observation: str,
                             ok: bool) -> PriorRow | None:
        at = sqlite_timestamp(utcnow())
        insert = _s("claim_finished")
        if await self.driver.write_one(insert.sql, insert.args((*row, at, observation, ok,
                                                                 at))) == 1:
            return None
        return await self._claimed_before(row)

    async def claim_finished_reading(self, row: tuple[str, str, str, str], observation: str,
                                     ok: bool, run_id: str, keys: Sequence[str]
                                     ) -> tuple[PriorRow | None, dict[str, PriorRow]]:
        # The claim, then the read: each is cheap on the caller's thread, and the read
        # would only hold the file's write lock longer inside the claim's transaction.
        prior = await self.claim_finished(row, observation, ok)
        return prior, await self.recorded_among(run_id, keys)

    async def _claimed_before(self, row: tuple[str, str, str, str]) -> PriorRow:
        """The record of an entry the claim found taken, as it is now, read after the claim
        (a ledger row is never deleted). Fails closed if it is not there: the claim did not
        land, so it must not read as this caller's."""
        prior = await self.recorded(row[0], row[1])
        if prior is None:
            raise ClaimNotFound(f"ledger entry {row[1]!r} of run {row[0]!r} was claimed, "
                                "yet it is not there")
        return prior

    async def recorded(self, run_id: str, tool_call_id: str) -> PriorRow | None:
        prior = _s("prior")
        return _prior(await self.driver.read(
            lambda c: c.execute(prior.sql, (run_id, tool_call_id)).fetchone()))

    async def recorded_among(self, run_id: str, keys: Sequence[str]
                             ) -> dict[str, PriorRow]:
        among = _s("prior_among")
        params = among.args((run_id, *among_keys(keys)))
        rows = await self.driver.read(lambda c: c.execute(among.sql, params).fetchall())
        return {str(r[0]): PriorRow(r[1], None if r[2] is None else bool(r[2]), r[3], r[4])
                for r in rows}

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool
                     ) -> None:
        finish = _s("finish")
        await self.driver.write_one(finish.sql, finish.args((
            observation, ok, sqlite_timestamp(utcnow()), run_id, tool_call_id)))

    async def finish_all(self, finishes: Sequence[LedgerFinish]) -> None:
        # One transaction: a transaction's BEGIN IMMEDIATE, COMMIT and WAL pages cost more
        # than the UPDATEs it carries.
        finish, at = _s("finish"), sqlite_timestamp(utcnow())
        rows = [finish.args((f.observation, f.ok, at, f.run_id, f.tool_call_id))
                for f in finishes]
        await self.driver.write(lambda conn: conn.executemany(finish.sql, rows))

    async def org_read_only(self, org_id: str) -> bool | None:
        read = _s("org_read_only")
        row = await self.driver.read(lambda c: c.execute(read.sql, (org_id,)).fetchone())
        return None if row is None or row[0] is None else bool(row[0])

    async def add_fact(self, row: FactRow, *, once: bool = False) -> None:
        insert = _s("fact_insert_once" if once else "fact_insert")
        await self.driver.write_one(insert.sql, insert.args((*row, sqlite_timestamp(utcnow()))))

    async def add_fact_finishing(self, row: FactRow, finishes: Sequence[LedgerFinish], *,
                                 once: bool = False) -> None:
        # One transaction: its BEGIN IMMEDIATE and COMMIT cost less than a commit of its own
        # for the fact (decision record 0031).
        insert, finish, at = (_s("fact_insert_once" if once else "fact_insert"), _s("finish"),
                              sqlite_timestamp(utcnow()))
        fact = insert.args((*row, at))
        rows = [finish.args((f.observation, f.ok, at, f.run_id, f.tool_call_id))
                for f in finishes]

        def write(conn: DriverConnection) -> None:
            conn.execute(insert.sql, fact)
            conn.executemany(finish.sql, rows)
        await self.driver.write(write)

    async def session_facts(self, session: str) -> list[FactRead]:
        # On the driver's connection, as the ledger's reads (through an ORM session it cost
        # about a millisecond: bench/provenance.py's lookup_p50_us).
        read = _s("session_facts")
        rows = await self.driver.read(lambda c: c.execute(read.sql, (session,)).fetchall())
        return [(str(r[0]), bool(r[1]), str(r[2]), str(r[3]), r[4]) for r in rows]

    async def token_user(self, digest: str) -> tuple[UserRow, bool] | None:
        # On the caller's thread (a WAL read): an ORM session hopped to aiosqlite's thread
        # for each of its four statements.
        read = _s("token_user")
        row = await self.driver.read(lambda c: c.execute(read.sql, read.args((digest,))).fetchone())
        return None if row is None else (_user(row), bool(row[7]))

    async def person(self, user_id: str) -> UserRow | None:
        read = _s("person")
        row = await self.driver.read(lambda c: c.execute(read.sql, (user_id,)).fetchone())
        return None if row is None else _user(row)

    async def mark_followed(self, run_id: str) -> None:
        return None  # one process serves the file: its streams are woken in memory

    async def take_rate_slot(self, key: str, start: int, limit: int) -> bool:
        take = _s("rate_take")
        params = take.args((key, start, limit))
        return await self.driver.write(
            lambda c: c.execute(take.sql, params).fetchone()) is not None

    async def claim_limits(self, call_key: str, wants: Sequence[Want], now: float | None
                           ) -> Claimed:
        at = time.time() if now is None else now
        claimed: Claimed = await self.driver.write(
            lambda conn: claim_on_sqlite(conn, call_key, wants, at))
        return claimed

    def append_audit_now(self, groups: AuditGroups, link: AuditLink
                         ) -> list[list[Any]] | NotNow:
        known = self._known_heads(groups)
        appended = self.driver.write_now(lambda conn: _append_audit(conn, groups, link, known))
        if isinstance(appended, NotNow):  # nothing was written: the guesses still hold
            for chain, head in known.items():
                self._audit_heads.setdefault(chain, head)
        else:
            self._remember_heads(groups, appended)
        return appended

    async def append_audit(self, groups: AuditGroups, link: AuditLink) -> list[list[Any]]:
        known = self._known_heads(groups)
        appended = await self.driver.write(lambda conn: _append_audit(conn, groups, link,
                                                                      known))
        self._remember_heads(groups, appended)
        return appended

    def _known_heads(self, groups: AuditGroups) -> dict[str, tuple[int, str]]:
        """The remembered heads of ``groups``' chains, forgotten until the append that uses
        them has committed (a failed one leaves them unknown)."""
        heads = self._audit_heads
        return {chain: heads.pop(chain) for chain, _ in groups if chain in heads}

    def _remember_heads(self, groups: AuditGroups, appended: list[list[Any]]) -> None:
        for (chain, _), out in zip(groups, appended, strict=True):
            self._audit_heads[chain] = (out[-1].seq, out[-1].row_hash)


class _Carried(NamedTuple):
    """The ledger's records a checkpoint carries: the results of the calls that ran
    (`finish` parameters) and the claim of the turn's first call (`claim` parameters)."""

    finishes: list[tuple[Any, ...]]
    claim: tuple[Any, ...] | None


class _Written(NamedTuple):
    """What `_write` found: the fence's token as stored (checked by the caller once the
    transaction is committed) and the earlier claim's record, if the carried claim found
    one."""

    fence: int | None
    prior: Any


def _write(conn: DriverConnection, checkpoint: tuple[Any, ...] | None,
           events: list[tuple[Any, ...]], fence: Fence | None,
           carried: _Carried | None = None) -> _Written:
    """The checkpoint, its events and what it carries in the write transaction (which
    holds SQLite's one write lock). A refused fence writes nothing of the run's but the
    results of the calls that ran (their tools did run: the ledger keeps them, as
    PostgreSQL's carrying statement does), and the caller raises Fenced after the commit."""
    if carried is not None and carried.finishes:
        conn.executemany(_s("finish").sql, carried.finishes)
    current = None
    if fence is not None:
        row = conn.execute(_s("fence").sql, (fence.run_id,)).fetchone()
        current = row[0] if row is not None else None
        if current != fence.token:
            return _Written(current, None)
    if checkpoint is not None:
        upsert = _s("checkpoint_upsert")
        conn.execute(upsert.sql, upsert.args(checkpoint))
    if events:
        conn.executemany(_s("event_insert").sql, events)
    prior = None
    if carried is not None and carried.claim is not None:
        claim = carried.claim
        if conn.execute(_s("claim").sql, claim).rowcount != 1:
            # Claimed before (a ledger row is never deleted): its record, read under the
            # same write lock.
            prior = conn.execute(_s("prior").sql, claim[:2]).fetchone()
            if prior is None:
                raise ClaimNotFound(f"ledger entry {claim[1]!r} of run {claim[0]!r} was "
                                    "claimed, yet it is not there")
    return _Written(current, prior)


def _claim(conn: DriverConnection, row: tuple[Any, ...], fence: Fence | None) -> Any:
    if fence is not None:
        found = conn.execute(_s("fence").sql, (fence.run_id,)).fetchone()
        fence.refuse_unless(found[0] if found is not None else None)
    if conn.execute(_s("claim").sql, row).rowcount == 1:
        return None
    return conn.execute(_s("prior").sql, row[:2]).fetchone()


def _user(row: Any) -> UserRow:
    return UserRow(row[0], row[1], bool(row[2]), row[3], bool(row[4]), bool(row[5]),
                   _sqlite_time(row[6]))


def _sqlite_time(value: Any) -> datetime | None:
    """A UTCDateTime column as the driver reads it (naive UTC text) back to aware UTC."""
    if value is None:
        return None
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def _prior(row: Any) -> PriorRow | None:
    if row is None:
        return None
    return PriorRow(row[0], None if row[1] is None else bool(row[1]), row[2], row[3])


def _append_audit(conn: DriverConnection, groups: AuditGroups, link: AuditLink,
                  known: dict[str, tuple[int, str]]) -> list[list[Any]]:
    """Each chain's rows after its head, in the write transaction (which holds SQLite's one
    write lock). A head this backend remembers writing is checked and moved in one
    statement (it still is the head unless another process appended since); else the head
    is read as it reserves the seq numbers, and moved after the rows."""
    insert = _s("audit_insert")
    appended = []
    for chain, records in groups:
        head = known.get(chain)
        moved = False
        if head is not None:
            was_seq, was_hash = head
            rows, out = link(chain, records, was_seq + len(records), was_hash)
            move = _s("audit_move_head")
            moved = conn.execute(move.sql, move.args((out[-1].seq, out[-1].row_hash, chain,
                                                      was_seq, was_hash))).rowcount == 1
        if not moved:
            reserve, set_head = _s("audit_reserve"), _s("audit_set_head")
            last_seq, prev = conn.execute(
                reserve.sql, reserve.args((chain, len(records), GENESIS))).fetchone()
            rows, out = link(chain, records, last_seq, prev)
        conn.executemany(insert.sql, [insert.args(_audit_values(row)) for row in rows])
        if not moved:
            conn.execute(set_head.sql, set_head.args((out[-1].row_hash, chain)))
        appended.append(out)
    return appended


def _audit_values(row: dict[str, Any]) -> tuple[Any, ...]:
    row["created_at"] = sqlite_timestamp(row["created_at"])
    return audit_row_values(row)




def _leave_checkpoints(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA wal_autocheckpoint={SAFETY_NET_PAGES}")
    cur.close()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()
