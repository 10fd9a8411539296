"""The one owner of session-aware limit counts: claims in ``limit_claims``, taken for every
limit a call falls under in one transaction, exact on any number of processes.

A claim is taken when a call is admitted and counts from then (in flight or done) until it
leaves its sliding window or is released. The transaction serialises per limit key: on
PostgreSQL an advisory lock per key (taken in key order, so two claims never deadlock), on
SQLite the database's one write lock (the first statement writes). Amounts are whole
ten-thousandths (``AMOUNT_SCALE``), so sums are exact on both databases.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, cast

from sqlalchemy import text

from hookgate.storage.backends.sqlite_driver import SqliteDriver
from hookgate.storage.database import Database

#: Amounts are kept as integers in units of 1/AMOUNT_SCALE (four decimal places, as Cedar's
#: decimal holds them).
AMOUNT_SCALE = 10_000
#: The largest amount (in units) one claim or one window's sum may reach: Cedar's decimal
#: range, well inside a 64-bit column.
MAX_UNITS = 9_223_372_036_854_775_807 // 1024
#: Row kinds: a claim of a call in flight (given back if it is refused or fails), one of a
#: call that ran (``done``: counted until it leaves its window, never given back), and a
#: session's approved call of a tool.
CLAIM, DONE, APPROVED = "claim", "done", "approved"


@dataclass(frozen=True, slots=True)
class Want:
    """One limit a call falls under: its key, sliding window, caps and this call's amount."""

    key: str
    window_s: float
    max_count: int | None = None
    #: Cap on the window's sum, in units.
    max_units: int | None = None
    #: This call's amount, in units (0 for a count-only limit).
    units: int = 0


@dataclass(frozen=True, slots=True)
class Standing:
    """A limit's use in its window, this call's claim included when it was granted."""

    key: str
    count: int
    units: int


@dataclass(frozen=True, slots=True)
class Claimed:
    """The answer to a claim: granted for every limit, or refused by ``refused`` (then the
    last standing is that limit's as it would have been with this call)."""

    granted: bool
    standings: tuple[Standing, ...]
    refused: str | None = None
    #: Seconds until the oldest claim of the refusing limit leaves its window.
    retry_after: float = 0.0


_DELETE_OLD = ("DELETE FROM limit_claims WHERE limit_key = :k AND kind <> 'approved' "
               "AND at <= :edge")
_STANDING = ("SELECT count(*), coalesce(sum(amount), 0), "
             "coalesce(sum(CASE WHEN call_key = :c THEN 1 ELSE 0 END), 0), min(at), "
             "coalesce(sum(CASE WHEN call_key = :c THEN amount ELSE 0 END), 0) "
             "FROM limit_claims WHERE limit_key = :k AND kind <> 'approved' AND at > :edge")
_INSERT = ("INSERT INTO limit_claims (limit_key, call_key, kind, amount, at) "
           "VALUES (:k, :c, :kind, :u, :at)")
_UPDATE = ("UPDATE limit_claims SET amount = :u WHERE limit_key = :k AND call_key = :c "
           "AND kind = 'claim'")


_PG_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0))"
_PG_LOCK_CLOCK = ("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 0)), "
                  "extract(epoch from clock_timestamp())::float8")
#: Claims that left the window go, and the window's use is read, in one statement (its
#: SELECT reads the table as before the DELETE, which only removes rows it filters out).
_PG_STANDING = (
    "WITH gone AS (DELETE FROM limit_claims WHERE limit_key = $1::text "
    "AND kind <> 'approved' "
    "AND at <= $3::float8) "
    "SELECT count(*), coalesce(sum(amount), 0), "
    "coalesce(sum(CASE WHEN call_key = $2::text THEN 1 ELSE 0 END), 0), min(at), "
    "coalesce(sum(CASE WHEN call_key = $2::text THEN amount ELSE 0 END), 0) "
    "FROM limit_claims WHERE limit_key = $1::text AND kind <> 'approved' "
    "AND at > $3::float8")
_PG_UPDATE = ("UPDATE limit_claims SET amount = $3::bigint WHERE limit_key = $1::text "
              "AND call_key = $2::text AND kind = 'claim'")
_PG_INSERT = ("INSERT INTO limit_claims (limit_key, call_key, kind, amount, at) "
              "VALUES ($1::text, $2::text, $3::text, $4::bigint, $5::float8)")


class _PgTransactions(Protocol):
    """A PostgreSQL backend's driver: a raw connection inside one transaction."""

    def transaction(self) -> AbstractAsyncContextManager[Any]: ...


class _Writes(Protocol):
    """A SQLite backend's driver: ``work(conn)`` in one IMMEDIATE transaction."""

    async def write(self, work: Callable[[sqlite3.Connection], Any]) -> Any: ...


def decide(call_key: str, wants: Sequence[Want], rows: Sequence[tuple[Any, ...]],
           now: float) -> tuple[Claimed, list[Want], list[Want]]:
    """The answer for ``wants`` given each one's (count, sum, claims of this call, oldest
    claim's time, this call's amount) in its window; the claims to insert and the ones of
    this call whose amount changes (its arguments were rewritten or edited since its first
    claim), none when refused."""
    standings: list[Standing] = []
    inserts: list[Want] = []
    updates: list[Want] = []
    for want, (count, units, mine, oldest, my_units) in zip(wants, rows, strict=True):
        count, units = int(count), int(units)
        if int(mine) == 0:
            count, units = count + 1, units + want.units
            grows = True
        else:
            units += want.units - int(my_units)
            grows = want.units > int(my_units)
        if grows and ((want.max_count is not None and count > want.max_count)
                      or (want.max_units is not None and units > want.max_units)
                      or units > MAX_UNITS):
            wait = 0.0 if oldest is None else float(oldest) + want.window_s - now
            return Claimed(False, (*standings, Standing(want.key, count, units)),
                           want.key, max(0.0, wait)), [], []
        if int(mine) == 0:
            inserts.append(want)
        elif want.units != int(my_units):
            updates.append(want)
        standings.append(Standing(want.key, count, units))
    return Claimed(True, tuple(standings)), inserts, updates


class LimitClaims:
    """Claims and releases on the database's ``limit_claims`` table."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._postgres = db.backend.dialect == "postgresql"
        #: A SQLite file's driver (one writer, BEGIN IMMEDIATE); with neither, SQLAlchemy
        #: (a SQLite database in memory).
        driver = getattr(db.backend, "driver", None)
        self._sqlite: _Writes | None = driver if isinstance(driver, SqliteDriver) else None
        #: PostgreSQL's raw driver (short transactions on raw connections).
        self._pg: _PgTransactions | None = driver if self._postgres else None

    async def claim(self, call_key: str, wants: Sequence[Want], now: float | None = None
                    ) -> Claimed:
        """Claim one call against every limit in ``wants``: all granted, or none taken.
        A call that holds a claim on a key already (asked again after a person decided, or
        checked again with its final arguments) takes no second one there: its claim's
        amount becomes this one (refused if a larger amount no longer fits)."""
        if self._sqlite is not None:
            at = time.time() if now is None else now
            return cast(Claimed, await self._sqlite.write(
                lambda conn: _claim_sqlite(conn, call_key, wants, at)))
        if self._pg is not None:
            return await self._claim_postgresql(self._pg, call_key, wants, now)
        async with self.db.transaction() as tx:  # a SQLite database in memory
            at = time.time() if now is None else now
            # This write, the transaction's first statement, takes the write lock before
            # anything is read.
            for want in wants:
                await tx.execute(text(_DELETE_OLD), {"k": want.key,
                                                     "edge": at - want.window_s})
            rows = [tuple((await tx.execute(text(_STANDING), {
                "k": want.key, "c": call_key, "edge": at - want.window_s})).one())
                for want in wants]
            claimed, inserts, updates = decide(call_key, wants, rows, at)
            for want in inserts:
                await tx.execute(text(_INSERT), {"k": want.key, "c": call_key,
                                                 "kind": CLAIM, "u": want.units, "at": at})
            for want in updates:
                await tx.execute(text(_UPDATE), {"k": want.key, "c": call_key,
                                                 "u": want.units})
        return claimed

    async def _claim_postgresql(self, pg: _PgTransactions, call_key: str,
                                wants: Sequence[Want], now: float | None) -> Claimed:
        # One advisory lock per key, in key order (two claims never wait on each other in
        # a cycle), held to the commit; each statement after it reads the latest commits.
        keys = sorted({w.key for w in wants})
        async with pg.transaction() as conn:
            for key in keys[:-1]:
                await conn.execute(_PG_LOCK, f"hookgate.limit:{key}")
            row = await conn.fetchrow(_PG_LOCK_CLOCK, f"hookgate.limit:{keys[-1]}")
            at = float(row[1]) if now is None else now
            rows = [tuple(await conn.fetchrow(_PG_STANDING, want.key, call_key,
                                              at - want.window_s))
                    for want in wants]
            claimed, inserts, updates = decide(call_key, wants, rows, at)
            for want in inserts:
                await conn.execute(_PG_INSERT, want.key, call_key, CLAIM, want.units, at)
            for want in updates:
                await conn.execute(_PG_UPDATE, want.key, call_key, want.units)
        return claimed

    async def release(self, call_key: str) -> int:
        """Give back every claim of ``call_key`` in flight (it was refused, rejected or
        failed; one of a call that ran stays); how many there were. Releasing only lowers
        counts, so it needs no lock."""
        async with self.db.transaction() as tx:
            done = await tx.execute(text(
                "DELETE FROM limit_claims WHERE call_key = :c AND kind = 'claim'"),
                {"c": call_key})
        return int(getattr(done, "rowcount", 0) or 0)

    async def settle(self, call_key: str) -> None:
        """``call_key``'s call ran: its claims count until they leave their windows and are
        never given back (a later refusal of the same call id cannot free them)."""
        async with self.db.transaction() as tx:
            await tx.execute(text(
                "UPDATE limit_claims SET kind = 'done' WHERE call_key = :c AND kind = 'claim'"),
                {"c": call_key})

    async def record_approved(self, key: str, call_key: str, now: float | None = None) -> None:
        """Remember that ``key`` (a session and a tool) had an approved call that ran."""
        async with self.db.transaction() as tx:
            await tx.execute(text(
                _INSERT), {"k": key, "c": call_key, "kind": APPROVED, "u": 0,
                                "at": time.time() if now is None else now})

    async def approved(self, key: str) -> bool:
        """Whether ``key`` (a session and a tool) had an approved call that ran."""
        async with self.db.session() as s:
            found = (await s.execute(text(
                "SELECT 1 FROM limit_claims WHERE limit_key = :k AND kind = 'approved' "
                "LIMIT 1"), {"k": key})).first()
        return found is not None


def _claim_sqlite(conn: sqlite3.Connection, call_key: str, wants: Sequence[Want],
                  now: float) -> Claimed:
    """The claim inside the driver's IMMEDIATE transaction (the write lock is held)."""
    rows = []
    for want in wants:
        conn.execute(_DELETE_OLD, {"k": want.key, "edge": now - want.window_s})
        rows.append(tuple(conn.execute(_STANDING, {
            "k": want.key, "c": call_key, "edge": now - want.window_s}).fetchone()))
    claimed, inserts, updates = decide(call_key, wants, rows, now)
    for want in inserts:
        conn.execute(_INSERT, {"k": want.key, "c": call_key, "kind": CLAIM,
                               "u": want.units, "at": now})
    for want in updates:
        conn.execute(_UPDATE, {"k": want.key, "c": call_key, "u": want.units})
    return claimed
